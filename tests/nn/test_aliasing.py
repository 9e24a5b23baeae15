"""Editing arrays between forward and backward never changes the gradient.

backward differentiates the forward that ran: forward keeps private copies of everything its
backward reads (x, the weights, a fixed dropout mask, a custom mask, the fast paths' output), so
editing the caller's arrays in place, an optimizer step, or rebinding ``.data`` in between gives
exactly the gradient an untouched module gives, on every path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES, AttentionCase

import npattn
from npattn import kernels

IMPLS = ["reference", "fused", "tiled"]


def _set_impl(model: npattn.Module, impl: str) -> npattn.Module:
    for module in model.modules():
        if hasattr(module, "impl"):
            module.impl = impl
    return model


def _scale_weights(model: npattn.Module, out: np.ndarray) -> None:
    for p in model.parameters():
        p.data *= 2.0


def _sgd_step(model: npattn.Module, out: np.ndarray) -> None:
    for p in model.parameters():
        p.data -= 0.5 * np.ones_like(p.data)


def _rebind_weights(model: npattn.Module, out: np.ndarray) -> None:
    for p in model.parameters():
        p.data = p.data[::-1].copy()


def _edit_output(model: npattn.Module, out: np.ndarray) -> None:
    out *= 3.0


EDITS: dict[str, Callable[[npattn.Module, np.ndarray], None]] = {
    "output *= 3": _edit_output,
    "every weight *= 2": _scale_weights,
    "an optimizer-like step": _sgd_step,
    ".data rebound": _rebind_weights,
}


def _run(model: npattn.Module, x: np.ndarray, g: np.ndarray, edit: Callable | None = None) -> list[np.ndarray]:
    model.zero_grad()
    out = model(x)
    if edit is not None:
        edit(model, out)
    dx = model.backward(g)
    return [dx] + [p.grad.copy() for p in model.parameters()]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_edits_between_forward_and_backward_do_not_change_the_gradient(case: AttentionCase, edit: str, impl: str):
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    untouched = _run(_set_impl(case.build(3, 2, 0, np.float64), impl), x, g)
    edited = _run(_set_impl(case.build(3, 2, 0, np.float64), impl), x, g, EDITS[edit])
    for a, b in zip(edited, untouched):
        np.testing.assert_array_equal(a, b)


def _dropout_model(impl: str) -> npattn.CausalAttention:
    model = _set_impl(npattn.CausalAttention(3, 2, 6, 0.5, rng=0, dtype=np.float64), impl)
    model.dropout.fixed_keep = np.random.default_rng(3).random((2, 5, 5)) > 0.5
    return model


def _edit_keep(model: npattn.Module, out: np.ndarray) -> None:
    model.dropout.fixed_keep[...] = True


def _rebind_keep(model: npattn.Module, out: np.ndarray) -> None:
    model.dropout.fixed_keep = None


def _edit_custom_mask(model: npattn.Module, out: np.ndarray) -> None:
    model.mask[...] = False


def _custom_mask_model(impl: str) -> npattn.CausalAttention:
    model = _set_impl(npattn.CausalAttention(3, 2, 6, 0.0, rng=0, dtype=np.float64), impl)
    model.mask[:, 0] = True  # not the book's mask: the reference path runs with mask=
    model.mask[0, 0] = False
    return model


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    "make, edit",
    [(_dropout_model, _edit_keep), (_dropout_model, _rebind_keep), (_custom_mask_model, _edit_custom_mask)],
    ids=["fixed_keep edited", "fixed_keep rebound", "custom mask edited"],
)
def test_masks_edited_between_forward_and_backward_do_not_change_the_gradient(make, edit, impl):
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    untouched = _run(make(impl), x, g)
    edited = _run(make(impl), x, g, edit)
    for a, b in zip(edited, untouched):
        np.testing.assert_array_equal(a, b)


def test_linear_and_dropout_alone():
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    linear, fresh = npattn.Linear(3, 2, rng=0, dtype=np.float64), npattn.Linear(3, 2, rng=0, dtype=np.float64)
    for edit in (_edit_output, _scale_weights):
        assert all(np.array_equal(a, b) for a, b in zip(_run(linear, x, g, edit), _run(fresh, x, g)))
        linear.load_state_dict(fresh.state_dict())
    dropout = npattn.Dropout(0.5, rng=0)
    keep = rng.random((4, 2)) > 0.5
    dropout.fixed_keep = keep.copy()
    dropout(g)
    dropout.fixed_keep[...] = True
    np.testing.assert_array_equal(dropout.backward(np.ones((4, 2))), keep / 0.5)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("target", ["queries", "keys", "values", "output"])
def test_kernel_inputs_and_output_edited_before_backward(impl, target):
    rng = np.random.default_rng(4)
    q, k, v, g = (rng.standard_normal((2, 7, 3)) for _ in range(4))
    _, cache = kernels.attention(q, k, v, impl=impl, causal=True)
    untouched = kernels.attention_backward(g, cache)
    arrays = {"queries": q, "keys": k, "values": v}
    out, cache = kernels.attention(q, k, v, impl=impl, causal=True)
    (out if target == "output" else arrays[target])[...] = 5.0
    for a, b in zip(kernels.attention_backward(g, cache), untouched):
        np.testing.assert_array_equal(a, b)
