"""A float64 output of float64 x and weights is judged to float64's precision: with the default
rtol (float32's, 1e-5) an output 1e-6 off (an eps of 1e-5 added to the softmax denominator) was
certified correct by diagnose, check_rows and compare. A float64 output of float32 inputs (NumPy 2
gives ``x32 @ W32 / np.sqrt(2.0)`` in float64) carries float32's precision and is judged as before."""

import numpy as np
import pytest

import npattn
from npattn.debug.tolerance import FORWARD_RTOL, FORWARD_RTOL_FLOAT64, forward_rtol
from npattn.debug.usercode import book_weights


def _attention(x, W_query, W_key, W_value, eps=0.0):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ k.T / np.sqrt(2.0)
    a = np.exp(s - s.max(-1, keepdims=True))
    return a / (a.sum(-1, keepdims=True) + eps) @ v


def _inputs(dtype):
    return npattn.book_inputs().astype(dtype), {k: v.astype(dtype) for k, v in book_weights().items()}


@pytest.mark.parametrize("check", ["diagnose", "check_rows"])
def test_an_output_1e_6_off_fails_in_float64(check):
    x, weights = _inputs(np.float64)
    wrong = _attention(x, *weights.values(), eps=1e-5)
    right = _attention(x, *weights.values())
    assert 1e-7 < np.max(np.abs(wrong - right) / np.max(np.abs(right), axis=0)) < 1e-5
    if check == "diagnose":
        assert not npattn.diagnose(x, weights, wrong).correct and npattn.diagnose(x, weights, right).correct
    else:
        assert not npattn.check_rows(x, weights, wrong).passed and npattn.check_rows(x, weights, right).passed


def test_compare_finds_the_float64_divergence():
    x, weights = _inputs(np.float64)
    found = npattn.compare(
        lambda x, Wq, Wk, Wv: _attention(x, Wq, Wk, Wv), lambda x, Wq, Wk, Wv: _attention(x, Wq, Wk, Wv, 1e-5),
        x, weights=weights,
    )  # fmt: skip
    assert found.first_divergence == "context_vec"


def test_a_float64_output_of_float32_inputs_keeps_float32s_tolerance():
    x, weights = _inputs(np.float32)
    out = _attention(x, *weights.values())  # float64 (np.sqrt(2.0) promotes), float32's precision
    assert out.dtype == np.float64
    assert npattn.diagnose(x, weights, out).correct and npattn.check_rows(x, weights, out).passed


def test_only_an_unset_rtol_is_chosen_by_precision():
    f64 = np.zeros(2)
    assert forward_rtol(None, None, True, f64) == FORWARD_RTOL_FLOAT64
    assert forward_rtol(None, 0.0, True, f64) == FORWARD_RTOL  # atol given: float32's default rtol
    assert forward_rtol(FORWARD_RTOL, None, True, f64) == FORWARD_RTOL  # given: used as given
    assert forward_rtol(2e-5, None, True, f64) == 2e-5
    assert forward_rtol(None, None, False, f64) == FORWARD_RTOL
    assert forward_rtol(None, None, True, f64.astype(np.float32)) == FORWARD_RTOL


def test_an_rtol_given_is_used_as_given():
    x, weights = _inputs(np.float64)
    wrong = _attention(x, *weights.values(), eps=1e-5)
    assert npattn.diagnose(x, weights, wrong, rtol=1e-5).correct
    assert npattn.check_rows(x, weights, wrong, rtol=1e-5).passed


def test_compare_of_float64_modules_is_judged_in_float64_and_of_a_float32_learner_in_float32():
    x, _ = _inputs(np.float64)
    ref = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    scaled = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    scaled.W_value.data *= 1 + 1e-6
    assert npattn.compare(ref, scaled, x).first_divergence == "values"
    _, w32 = _inputs(np.float32)

    def learner32(x):  # float32 weights of its own, a float64 output (np.sqrt(2.0) promotes)
        return _attention(x.astype(np.float32), *w32.values())

    ref.load_state_dict({k: v.astype(np.float64) for k, v in w32.items()})
    assert npattn.compare(ref, learner32, x).first_divergence is None
