"""The debugging tools judge what they are given: an output check_rows_of cannot check is refused,
token names must fit the rows, and a correct float32 output passes within float32's documented
bound while a real mistake still fails."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def _mha() -> npattn.MultiHeadAttention:
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1)


@pytest.mark.parametrize("shift", [None, 1.0])
def test_check_rows_of_multihead_refuses_an_output_it_cannot_check(shift):
    m, x = _mha(), npattn.book_batch()
    out = np.zeros_like(m(x)) if shift is None else m(x) + shift
    with pytest.raises(ConfigError, match=r"merged_heads.*pass a Trace of it \(npattn.trace\(module, x\)\).*ndarray"):
        npattn.check_rows_of(m, x, out)


def test_check_rows_of_multihead_still_checks_a_trace_and_its_own_run():
    m, x = _mha(), npattn.book_batch()
    assert npattn.check_rows_of(m, x).passed
    assert npattn.check_rows_of(m, x, npattn.trace(m, x)).passed


def test_check_rows_of_the_other_classes_still_judges_the_given_output():
    m, x = npattn.CausalAttention(3, 2, 6, 0.0, rng=1), npattn.book_batch()
    assert npattn.check_rows_of(m, x, m(x)).passed
    assert not npattn.check_rows_of(m, x, m(x) + 1.0).passed


def _large_float32_case() -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """npattn's own float32 output where the scaled scores reach S = 1848: its error against float64
    (3.7e-4) is inside float32's documented bound but 1000x above the default rtol of the output."""
    rs = np.random.default_rng(0)
    m = npattn.SelfAttention_v1(32, 32, rng=3, impl="fused")
    x = (rs.standard_normal((250, 32)) * 2).astype(np.float32)
    return x, npattn.weights_of(m), m(x)


def test_a_correct_float32_output_passes_within_float32s_bound():
    x, W, out = _large_float32_case()
    assert out.dtype == np.float32
    assert npattn.diagnose(x, W, out).correct
    rows = npattn.check_rows(x, W, out)
    assert rows.passed and "float32's rounding" in str(rows)


def test_the_float32_allowance_still_fails_real_mistakes():
    x, W, out = _large_float32_case()
    x64, W64 = x.astype(np.float64), {n: w.astype(np.float64) for n, w in W.items()}
    chosen = ("missing_scale", "softmax_wrong_axis", "context_from_keys", "weights_transposed", "no_softmax")
    for mistake in (m for m in npattn.CATALOGUE if m.identifier in chosen):
        wrong = mistake.reproduce(x64, W64["W_query"], W64["W_key"], W64["W_value"], False).astype(np.float32)
        diagnosis = npattn.diagnose(x, W, wrong)
        assert not diagnosis.correct and mistake.identifier in diagnosis.matches, mistake.identifier
        assert not npattn.check_rows(x, W, wrong).passed, mistake.identifier
    off = out * np.float32(1.001)  # off by 0.1%: the allowance is capped below it
    assert not npattn.diagnose(x, W, off).correct and not npattn.check_rows(x, W, off).passed
    one = out.copy()
    one[100, 5] *= np.float32(1.001)  # one entry (16.4, the largest 26.3) off by 0.1% of itself
    assert not npattn.diagnose(x, W, one).correct and not npattn.check_rows(x, W, one).passed


def test_the_allowance_is_for_float32_only_and_not_with_an_explicit_atol():
    x, W, out = _large_float32_case()
    assert not npattn.diagnose(x, W, out.astype(np.float64)).correct  # a float64 output: float64's precision
    assert not npattn.check_rows(x, W, out.astype(np.float64)).passed
    assert not npattn.check_rows(x, W, out, atol=1e-6).passed  # the caller's tolerance is used as given


@pytest.mark.parametrize("names", [["a", "b"], list("abcdefgh")])
def test_check_rows_refuses_token_names_that_do_not_fit_the_rows(names):
    x, W = npattn.book_inputs().astype(np.float64), npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=1))
    out = npattn.SelfAttention_v1(3, 2, rng=1)(x)
    with pytest.raises(ConfigError, match=rf"tokens has {len(names)} names for 6 tokens"):
        npattn.check_rows(x, W, out, tokens=names)
    assert npattn.check_rows(x, W, out, tokens=npattn.BOOK_TOKENS).passed
