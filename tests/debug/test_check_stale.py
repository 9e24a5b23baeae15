"""npattn check fails a forward that is right only on its first call (a cached output or cached
attention weights) and a float64 backward that finite differences of its own forward reject: npattn's
gradient judges only a forward whose output shows lower precision."""

import numpy as np
import stale_learners as S

from npattn.debug.backcheck import _precision_note
from npattn.debug.usercode import attention_from_module, check_attention


def check(name):
    S._memo.clear()
    return check_attention(attention_from_module(S, name))


def test_cached_attention_weights_fail():
    report = check("StaleWeights")
    assert not report and "wrong for a second input of the same shape" in str(report)


def test_a_cached_output_fails():
    report = check("memo")
    assert not report and "wrong for a second input of the same shape" in str(report)


def test_a_small_float64_bug_is_judged_by_finite_differences():
    report = check("off")
    assert not report and report.backward.judge == "finite differences"
    assert not report.backward.precision_note and "float32 or lower" not in str(report)
    assert "dW_key differs from finite differences" in str(report)


def test_the_precision_note_needs_an_output_that_shows_lower_precision():
    expected = np.linspace(0.1, 1.0, 12).reshape(6, 2)
    noisy = ["dW_key"]
    assert _precision_note(expected.copy(), expected, np.dtype(np.float64), noisy) == ""  # float64-exact output
    assert "float32 or lower" in _precision_note(
        expected.astype(np.float32).astype(np.float64) + 1e-7, expected, np.dtype(np.float64), noisy
    )
    assert "returns float32" in _precision_note(expected, expected, np.dtype(np.float32), [])


def test_a_forward_only_class_with_cached_weights_fails():
    class StaleForwardOnly(S.StaleWeights):
        backward = None

    S.StaleForwardOnly = StaleForwardOnly
    try:
        report = check("StaleForwardOnly")
    finally:
        del S.StaleForwardOnly
    assert not report and report.backward is None
    assert "second input: FAILED" in str(report) and "second input: see there" in report.verdict()
