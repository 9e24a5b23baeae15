"""gradcheck_stage runs a backward of other inputs' cache before the checked one, and the forward on
other inputs last: a backward that latches its first call's cache, or reads the last forward's global
instead of its cache argument, gives the other inputs' gradient and fails, saying so."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import GradcheckError
from npattn.nn import functional as F

REASON = "another input's gradient"


def test_a_backward_that_latches_its_first_calls_cache_fails():
    latched: dict = {}

    def backward(d_out, cache):
        latched.setdefault("cache", cache)
        return F.gelu_backward(d_out, latched["cache"])

    x = np.random.default_rng(0).standard_normal(7)
    with pytest.raises(GradcheckError, match=REASON) as info:
        npattn.gradcheck_stage(F.gelu_forward, backward, [x])
    assert "keeps state between calls" in str(info.value)


def test_a_backward_that_reads_the_last_forwards_global_fails():
    last: dict = {}

    def forward(x):
        out, cache = F.gelu_forward(x)
        last["cache"] = cache
        return out, cache

    x = np.random.default_rng(0).standard_normal(7)
    report = npattn.gradcheck_stage(forward, lambda d, c: F.gelu_backward(d, last["cache"]), [x],
                                    raise_exception=False)  # fmt: skip
    assert not report
    assert REASON in report.reason


def test_stateless_pairs_still_pass_with_the_same_gradients():
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    calls: list = []

    def backward(d_out, cache):
        grads = F.scores_backward(d_out, cache)
        calls.append(grads)
        return grads

    assert npattn.gradcheck_stage(F.scores_forward, backward, [q, k])
    out, cache = F.scores_forward(q.copy(), k.copy())
    G = np.random.default_rng(0).standard_normal(out.shape)
    for got, want in zip(calls[-1], F.scores_backward(G, cache)):
        np.testing.assert_array_equal(got, want)
