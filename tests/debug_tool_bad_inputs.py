"""Bad inputs of gradcheck and the debugging tools that would make their verdict untrustworthy,
as rows of tests/test_errors.py's table (entry, what, call, error, fragment)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import npattn
from npattn.cli.trace import run_trace
from npattn.debug.backward import diagnose_backward
from npattn.debug.usercode import attention_from_module, book_weights, check_attention
from npattn.nn import functional as F


class _NoBackward(npattn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W = npattn.Parameter(np.ones((3, 2)))

    def forward(self, x: Any) -> np.ndarray:
        return np.asarray(x) @ self.W.data


def _nan_forward(a: np.ndarray) -> tuple[np.ndarray, None]:
    return a * np.nan, None


def _returns_three(x: Any, W_query: Any, W_key: Any, W_value: Any) -> Any:
    return x @ W_value, {"x": x}, 1


def debug_tool_bad_inputs(
    on_16_gib: Callable[[Callable[[], Any]], Callable[[], Any]],
) -> list[tuple[str, str, Callable[[], Any], type[Exception], str]]:
    """Rows; ``on_16_gib(call)`` runs ``call`` as if this machine had 16 GiB of memory."""
    cfg = npattn.ConfigError
    x, W = npattn.book_inputs(), book_weights()
    q = np.random.default_rng(0).standard_normal((4, 3))
    v2 = npattn.SelfAttention_v2(3, 2, qkv_bias=True, rng=1)
    user = type(sys)("three_values_user")
    user.returns_three = _returns_three
    v1 = npattn.SelfAttention_v1
    return [
        (
            "gradcheck(module, x)",
            "eps=1e-30 (every numerical gradient 0: a correct backward failed)",
            lambda: npattn.gradcheck(v1(3, 2, rng=0), x, eps=1e-30),
            cfg,
            "eps=1e-30 is too small for float64 at these magnitudes",
        ),
        (
            "gradcheck(module, x)",
            "a module without backward (was a NotImplementedError)",
            lambda: npattn.gradcheck(_NoBackward(), x),
            cfg,
            "gradcheck needs a module with a backward: _NoBackward does not implement backward()",
        ),
        (
            "gradcheck_stage(...)",
            "kwargs=5 (was a TypeError)",
            lambda: npattn.gradcheck_stage(F.softmax_forward, F.softmax_backward, [q], kwargs=5),  # type: ignore[arg-type]
            cfg,
            "kwargs must be a dict of forward's keyword arguments (or None), got int",
        ),
        (
            "gradcheck_stage(...)",
            "a forward whose output is NaN (was 'max abs error nan > allowed nan')",
            lambda: npattn.gradcheck_stage(_nan_forward, lambda d, c: (d,), [q]),
            cfg,
            "the forward output is not finite (12 of 12 entries are NaN or inf)",
        ),
        (
            "diagnose(x, weights, output)",
            "atol=1 (all zeros were certified correct)",
            lambda: npattn.diagnose(x, W, np.zeros((6, 2)), atol=1.0),
            cfg,
            "diagnose: atol=1 is too wide for these values",
        ),
        (
            "diagnose(x, weights, output)",
            "atol=-1",
            lambda: npattn.diagnose(x, W, np.zeros((6, 2)), atol=-1),
            cfg,
            "atol and rtol must be >= 0, got atol=-1",
        ),
        (
            "check_rows(x, weights, output)",
            "atol=10 (all zeros passed)",
            lambda: npattn.check_rows(x, W, np.zeros((6, 2)), atol=10.0),
            cfg,
            "check_rows: atol=10 is too wide for these values",
        ),
        (
            "compare(reference, candidate, x)",
            "atol=-1",
            lambda: npattn.compare(v1(3, 2), v1(3, 2), x, atol=-1),
            cfg,
            "compare: atol and rtol must be >= 0, got atol=-1",
        ),
        (
            "diagnose_backward(x, weights, grad_output, grads)",
            "the weights of a qkv_bias=True module (its biases were dropped)",
            lambda: diagnose_backward(x, v2, np.ones((6, 2)), {}),
            cfg,
            "the weights hold nonzero biases (W_query.bias, W_key.bias, W_value.bias)",
        ),
        (
            "check_attention(attention)",
            "user code returning (out, cache, 1)",
            lambda: check_attention(attention_from_module(user, "returns_three")),
            npattn.DTypeError,
            "returns_three returned a tuple of 3 (ndarray (6, 2), dict, int), which npattn cannot read as an array",
        ),
        (
            "npattn trace --tokens N --class mha --heads H --d-out D",
            "sizes inside the bounds whose trace needs more than this machine's memory (was a MemoryError)",
            on_16_gib(lambda: run_trace(4096, 3, 64, attention="mha", num_heads=64, out=io.StringIO())),
            cfg,
            "tracing 4096 tokens (every stage recorded, 24 GiB, and the forward's own) would need",
        ),
    ]
