"""The forward checks (check_rows, diagnose, compare, npattn check) judge relative to the magnitude
of what they compare, and refuse tolerances that are negative, NaN, or too wide to fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.debug.usercode import book_weights, check_attention

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
X = npattn.book_inputs().astype(np.float64)
V1 = npattn.SelfAttention_v1


def scaled(s: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    return X * s, {n: w.astype(np.float64) * s for n, w in book_weights().items()}


def output_of(x: np.ndarray, W: dict[str, np.ndarray]) -> np.ndarray:
    module = npattn.SelfAttention_v1(3, 2, dtype=np.float64)
    module.load_state_dict(W)
    return module(x)


def test_an_all_zero_output_fails_when_the_true_outputs_are_tiny():
    W = {n: w * 1e-6 for n, w in book_weights().items()}
    assert np.abs(output_of(X, W)).max() < 1e-6
    assert not npattn.diagnose(X, W, np.zeros((6, 2))).correct
    assert not npattn.check_rows(X, W, np.zeros((6, 2))).passed


@pytest.mark.parametrize("s", [1e-4, 1e-2, 1.0, 30.0])
def test_a_correct_output_passes_at_every_scale_and_a_sign_flip_fails(s):
    x, W = scaled(s)
    out = output_of(x, W)
    assert npattn.diagnose(x, W, out).correct and npattn.check_rows(x, W, out).passed
    assert npattn.diagnose(x, W, out.astype(np.float32)).correct  # float32's rounding passes
    assert not npattn.diagnose(x, W, -out).correct and not npattn.check_rows(x, W, -out).passed
    assert not npattn.diagnose(x, W, out * (1 + 1e-3)).correct


def test_a_catalogued_mistake_fails_at_a_small_scale():
    x, W = scaled(0.1)
    report = check_attention(f"{EXAMPLES / 'broken_attention.py'}:softmax_over_queries", x=x, weights=W)
    assert not report.passed
    assert report.diagnosis.matches == ("softmax_wrong_axis",)


def test_compare_judges_each_stage_relative_to_its_magnitude():
    a = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    b = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    for module in (a, b):
        for p in module.parameters():
            p.data *= 1e-4
    assert npattn.compare(a, b, X).passed
    b.W_value.data *= -1
    assert npattn.compare(a, b, X).first_divergence == "values"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: npattn.diagnose(X, book_weights(), np.zeros((6, 2)), atol=1.0), "atol=1 is too wide"),
        (lambda: npattn.diagnose(X, book_weights(), np.zeros((6, 2)), atol=-1), "must be >= 0, got atol=-1"),
        (lambda: npattn.diagnose(X, book_weights(), np.zeros((6, 2)), rtol=float("nan")), "rtol must be a finite"),
        (lambda: npattn.check_rows(X, book_weights(), np.zeros((6, 2)), atol=10.0), "atol=10 is too wide"),
        (lambda: npattn.check_rows(X, book_weights(), np.zeros((6, 2)), rtol=0.01), "rtol must be below 0.001"),
        (lambda: npattn.compare(V1(3, 2), V1(3, 2), X, atol=-1), "got atol=-1"),
        (lambda: npattn.compare(V1(3, 2), V1(3, 2), X, atol=1), "stage"),
    ],
)
def test_tolerances_that_could_not_fail_are_refused(call, message):
    with pytest.raises(npattn.ConfigError, match=message):
        call()


def _off_by(x, W_query, W_key, W_value):
    import learners

    return learners.attention_forward(x, W_query, W_key, W_value)


def _off_by_backward(d_out, cache):
    import learners

    dx, dW_query, dW_key, dW_value = learners.attention_backward(d_out, cache)
    return dx, dW_query * (1 + 1e-5), dW_key, dW_value  # dW_query off by 1e-5 relative


@pytest.mark.parametrize("s", [1.0, 1e-2])
def test_wrong_backwards_fail_at_small_scales_and_right_ones_pass(s):
    import types

    from npattn.debug.usercode import attention_from_module

    x, W = scaled(s)
    user = types.ModuleType("scaled_user")
    user.off_by_forward, user.off_by_backward = _off_by, _off_by_backward
    report = check_attention(attention_from_module(user, "off_by"), x=x, weights=W)
    assert report.forward_right and not report.passed
    if s < 1:  # finite differences cannot resolve 1e-5 of dW_query here; npattn's gradient does
        assert "your forward is correct attention" in report.backward.verdict()
    no_rowsum = check_attention(f"{EXAMPLES / 'broken_backward.py'}:no_rowsum", x=x, weights=W)
    assert not no_rowsum.passed
    assert check_attention(f"{EXAMPLES / 'broken_backward.py'}:attention", x=x, weights=W).passed


def test_backward_tolerances_are_checked():
    from npattn.debug.backward import diagnose_backward

    grads = {"x": X, **book_weights()}
    with pytest.raises(npattn.ConfigError, match="diagnose_backward: atol and rtol must be >= 0"):
        diagnose_backward(X, book_weights(), np.ones((6, 2)), grads, atol=-1.0)


def test_a_multihead_output_of_zeros_fails_at_a_small_scale():
    import types

    from npattn.debug.usercode import attention_from_module, multihead_weights

    class Zeros:
        def __init__(self, d_in, d_out, context_length, dropout, num_heads):
            self.W_query = np.zeros((d_in, d_out))
            self.W_key = np.zeros((d_in, d_out))
            self.W_value = np.zeros((d_in, d_out))

        def __call__(self, x):
            return np.zeros((*x.shape[:-1], self.W_value.shape[1]))

    user = types.ModuleType("zeros_user")
    user.Zeros = Zeros
    W = {n: w * 1e-3 for n, w in multihead_weights().items()}
    report = check_attention(attention_from_module(user, "Zeros"), x=npattn.book_batch() * 1e-3, weights=W)
    assert not report.diagnosis.correct


def test_a_gradient_that_must_be_exactly_zero_prints_its_failure():
    from npattn.debug.backcheck import BackwardCheck, GradientRow
    from npattn.gradcheck import TensorCheck

    nothing_allowed = TensorCheck("W_query", (3, 2), 1e-20, 1.0, 0.0, (0, 0), 0.0, 1e-20)
    report = BackwardCheck("backward", rows=[GradientRow("W_query", (3, 2), nothing_allowed, nothing_allowed)])
    assert "inf over" in str(report) and not report.passed
