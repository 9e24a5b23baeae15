"""``causal='False'`` (a string) was read as True by diagnose, check_rows and diagnose_backward, so
right output was called wrong (missing_causal_mask); ``kernels.attention(copy='no')`` was truthy.
Flags are True or False (or 0/1), as everywhere else."""

import numpy as np
import pytest

import npattn
import npattn.debug
from npattn import kernels
from npattn.errors import ConfigError

RS = np.random.RandomState(5)
X = RS.randn(5, 4)
W = {k: RS.randn(4, 3) for k in ("W_query", "W_key", "W_value")}


def output():
    q, k, v = (X @ W[n] for n in W)
    s = q @ k.T / np.sqrt(3)
    a = np.exp(s - s.max(-1, keepdims=True))
    return (a / a.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("call", [
    lambda: npattn.diagnose(X, W, output(), causal="False"),
    lambda: npattn.check_rows(X, W, output(), causal="False"),
    lambda: npattn.debug.diagnose_backward(X, W, np.ones((5, 3)), {}, causal="False"),
    lambda: kernels.attention(X, X, X, copy="no"),
], ids=["diagnose", "check_rows", "diagnose_backward", "kernels copy"])  # fmt: skip
def test_a_string_flag_is_refused(call):
    with pytest.raises(ConfigError, match=r"must be True or False, got '(False|no)'"):
        call()


def test_real_flags_still_work():
    assert npattn.diagnose(X, W, output(), causal=False).correct
    assert npattn.check_rows(X, W, output(), causal=0).passed
    kernels.attention(X, X, X, copy=False)
