"""gradcheck_stage runs the forward on other inputs first (as gradcheck does with a module): a
backward that keeps an earlier forward's state instead of the cache it is given fails, and says so."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import GradcheckError
from npattn.nn import functional as F

REASON = "does not use the cache it is given"


def _first_cache_pair(forward, backward):
    """forward/backward whose backward reads the cache saved by the first forward call, not its argument."""
    saved: dict = {}

    def fw(*inputs):
        out, cache = forward(*inputs)
        saved.setdefault("cache", cache)
        return out, cache

    def bw(d_out, cache):
        return backward(d_out, saved["cache"])

    return fw, bw


def test_a_backward_that_keeps_the_first_forwards_cache_fails_with_the_reason():
    fw, bw = _first_cache_pair(F.gelu_forward, F.gelu_backward)
    x = np.random.default_rng(0).standard_normal((3, 4))
    with pytest.raises(GradcheckError, match=REASON) as info:
        npattn.gradcheck_stage(fw, bw, [x])
    assert str(info.value).startswith("gradcheck_stage: the backward does not use the cache")
    assert str(info.value).count(REASON) == 1  # said once, first


def test_a_two_input_stage_with_a_stale_cache_fails_and_the_report_says_why():
    fw, bw = _first_cache_pair(F.scores_forward, F.scores_backward)
    rng = np.random.default_rng(1)
    report = npattn.gradcheck_stage(fw, bw, [rng.standard_normal((4, 3)), rng.standard_normal((5, 3))],
                                    names=["queries", "keys"], raise_exception=False)  # fmt: skip
    assert not report
    assert report.reason and "queries, keys" in report.reason
    assert REASON in str(report)


def test_correct_stages_still_pass_with_no_reason():
    rng = np.random.default_rng(2)
    assert npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [rng.standard_normal((3, 4))])
    report = npattn.gradcheck_stage(
        F.scores_forward, F.scores_backward, [rng.standard_normal((4, 3)), rng.standard_normal((5, 3))]
    )
    assert report and report.reason == ""


def test_an_ordinary_wrong_backward_gets_no_cache_reason():
    def off_backward(d_out, cache):
        (dx,) = F.gelu_backward(d_out, cache)
        return (dx * 1.0001,)

    x = np.random.default_rng(3).standard_normal((3, 4))
    with pytest.raises(GradcheckError, match="gradient of input0 is wrong") as info:
        npattn.gradcheck_stage(F.gelu_forward, off_backward, [x])
    assert REASON not in str(info.value)
