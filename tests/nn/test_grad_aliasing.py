"""A ``.grad`` that shares memory with another ``.grad`` or a weight is refused by backward and
replaced (not zeroed in place) by zero_grad; zero_grad takes PyTorch's ``set_to_none``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, AdamW

X = np.random.default_rng(0).standard_normal((4, 3))


def _model() -> npattn.Module:
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    model(X)
    return model


def _snapshot(model: npattn.Module) -> dict[str, Any]:
    return {n: (p.data.copy(), None if p.grad is None else p.grad.copy()) for n, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("share", "fragment"),
    [
        (lambda m: setattr(m.W_query, "grad", m.W_key.grad), "W_query.grad shares memory with W_key.grad"),
        (lambda m: setattr(m.W_query, "grad", m.W_query.data), "W_query.grad shares memory with its own .data"),
        (lambda m: setattr(m.W_value, "grad", m.W_key.data), "W_value.grad shares memory with W_key.data"),
        (lambda m: setattr(m.W_key, "grad", m.W_query.grad[::-1][::-1]), "W_query.grad shares memory with W_key.grad"),
    ],
)
def test_backward_refuses_grads_that_share_memory_and_changes_nothing(share: Any, fragment: str) -> None:
    """Both gradients came out wrong (the sum) or the weight itself changed, with no error."""
    model = _model()
    share(model)
    before = _snapshot(model)
    with pytest.raises(npattn.BackwardError, match=fragment):
        model.backward(np.ones((4, 2)))
    for name, (data, grad) in _snapshot(model).items():
        np.testing.assert_array_equal(data, before[name][0])
        np.testing.assert_array_equal(grad, before[name][1])


def test_grads_in_disjoint_parts_of_one_buffer_are_fine() -> None:
    model, expected = _model(), _model()
    buf = np.zeros((3, 6), np.float32)
    model.W_query.grad, model.W_key.grad, model.W_value.grad = buf[:, 0::3], buf[:, 1::3], buf[:, 2::3]
    model.backward(np.ones((4, 2)))
    expected.backward(np.ones((4, 2)))
    for (_, p), (_, q) in zip(model.named_parameters(), expected.named_parameters()):
        np.testing.assert_array_equal(p.grad, q.grad)


def test_the_gpt_refuses_shared_grads_too() -> None:
    cfg = {"vocab_size": 11, "context_length": 4, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
           "qkv_bias": False}  # fmt: skip
    model = npattn.GPTModel(cfg, rng=0, dtype=np.float64)
    model.out_head.weight.grad = model.tok_emb.weight.data
    logits = model(np.array([[1, 2, 3]]))
    with pytest.raises(npattn.BackwardError, match=r"out_head\.weight\.grad shares memory with tok_emb\.weight\.data"):
        model.backward(np.ones_like(logits))


@pytest.mark.parametrize("zero", [lambda m: m.zero_grad(), lambda m: SGD(m.parameters(), lr=0.1).zero_grad()])
def test_zero_grad_gives_shared_grads_their_own_zeros(zero: Any) -> None:
    """Zeroing in place would zero the weight (or the other gradient) too."""
    model = _model()
    weight = model.W_query.data.copy()
    model.W_query.grad = model.W_query.data
    model.W_key.grad = model.W_value.grad = np.ones((3, 2), np.float32)
    zero(model)
    np.testing.assert_array_equal(model.W_query.data, weight)
    assert not np.shares_memory(model.W_key.grad, model.W_value.grad)
    for p in model.parameters():
        np.testing.assert_array_equal(p.grad, 0)
    model.backward(np.ones((4, 2)))  # runs now


@pytest.mark.parametrize("owner", ["module", "SGD", "AdamW"])
def test_zero_grad_takes_pytorchs_set_to_none(owner: str) -> None:
    """zero_grad(set_to_none=...) was a raw TypeError. npattn's default stays zeros in place."""
    model = _model()
    model.backward(np.ones((4, 2)))
    target: Any = model if owner == "module" else {"SGD": SGD, "AdamW": AdamW}[owner](model.parameters(), lr=0.1)
    grad = model.W_query.grad
    target.zero_grad()
    assert model.W_query.grad is grad and not grad.any()  # the default: zeros, in place
    target.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in model.parameters())
    model(X)
    model.backward(np.ones((4, 2)))  # None is started from zeros
    expected = _model()
    expected.backward(np.ones((4, 2)))
    np.testing.assert_array_equal(model.W_query.grad, expected.W_query.grad)
    target.zero_grad(set_to_none=False)
    assert not model.W_query.grad.any()
    with pytest.raises(npattn.ConfigError, match="set_to_none must be True or False, got 'yes'"):
        target.zero_grad(set_to_none="yes")


def test_a_step_after_set_to_none_skips_the_parameters_like_torch() -> None:
    model = _model()
    weights = {n: p.data.copy() for n, p in model.named_parameters()}
    opt = SGD(model.parameters(), lr=0.1)
    opt.zero_grad(set_to_none=True)
    opt.step()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(p.data, weights[n])
