"""A tolerance below the finite differences' own noise: a correct backward that fails it is refused
(ConfigError naming the tolerance and the noise floor), never called wrong; a wrong gradient whose
error is above the noise is still a GradcheckError, and none passes."""

from __future__ import annotations

import numpy as np
import planted
import pytest

import npattn
from npattn.errors import ConfigError, GradcheckError
from npattn.nn import functional as F

TIGHT = [{"atol": 1e-12, "rtol": 1e-9}, {"atol": 0.0, "rtol": 0.0}]
NOISE = r"atol=.* is below what central differences can resolve here \(~.* for W_query, whose error"


def _book_module():
    return npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), npattn.book_inputs().astype(np.float64)


@pytest.mark.parametrize("tolerance", TIGHT)
def test_a_correct_backward_under_a_tolerance_below_the_noise_is_refused_not_called_wrong(tolerance):
    module, x = _book_module()
    with pytest.raises(ConfigError, match=NOISE):
        npattn.gradcheck(module, x, **tolerance)
    with pytest.raises(ConfigError, match=NOISE):  # a report could not say PASSED either
        npattn.gradcheck(module, x, raise_exception=False, **tolerance)
    assert npattn.gradcheck(module, x)  # the defaults pass it


def _dq_scaled_by(factor):
    """A scores backward whose dQ is scaled by ``factor`` (built from the original stage, which
    ``planted.plant`` replaces everywhere)."""
    original = F.scores_backward

    def broken(d_s, cache):
        d_q, d_k = original(d_s, cache)
        return d_q * factor, d_k

    return broken


BUGS = {  # each: the stage, and a function making its broken backward
    "dQ x 1.0001": ("scores_backward", lambda: _dq_scaled_by(1.0001)),
    "sign flip in the softmax backward": ("softmax_backward", lambda: planted.softmax_sign_flip),
    "missing scale in dQ/dK": ("softmax_backward", lambda: planted.softmax_missing_scale),
    "dK with a missing transpose": ("scores_backward", lambda: planted.scores_dK_missing_transpose),
}


@pytest.mark.parametrize("tolerance", [{}, *TIGHT])
@pytest.mark.parametrize("bug", list(BUGS))
def test_planted_bugs_are_still_gradcheck_errors_at_default_and_tight_tolerances(monkeypatch, bug, tolerance):
    module, x = _book_module()
    stage, make = BUGS[bug]
    planted.plant(monkeypatch, stage, make())
    with pytest.raises(GradcheckError, match="is wrong at"):
        npattn.gradcheck(module, x, **tolerance)


def test_a_bug_below_the_noise_is_refused_at_a_tight_tolerance_never_passed(monkeypatch):
    module, x = _book_module()
    # off by 1e-7 of W_query's gradient: ~6e-10, below the noise (~8e-9)
    planted.plant(monkeypatch, "scores_backward", _dq_scaled_by(1 + 1e-7))
    with pytest.raises(ConfigError, match=NOISE):
        npattn.gradcheck(module, x, atol=0.0, rtol=0.0)


def test_gradcheck_stage_refuses_a_tolerance_below_the_noise_and_still_fails_a_bug():
    x = np.random.default_rng(5).standard_normal((4, 5))
    with pytest.raises(ConfigError, match=r"atol=0 \(rtol=0\) is below .* for input0, whose error"):
        npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [x], atol=0.0, rtol=0.0)

    def off(d_out, cache):
        (dx,) = F.gelu_backward(d_out, cache)
        return (dx * 1.0001,)

    for tolerance in [{}, {"atol": 0.0, "rtol": 0.0}]:
        with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
            npattn.gradcheck_stage(F.gelu_forward, off, [x], **tolerance)
