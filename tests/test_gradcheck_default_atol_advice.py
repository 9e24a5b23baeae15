"""When the differences cannot resolve a failure under gradcheck's own default atol, the advice does
not say "leave atol at its default" (it already was); under a caller's atol it still does."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError

RNG = np.random.default_rng(10)


class Mixed(npattn.Module):
    """y = float32(x @ W) + x[:, :2]: one branch computed in float32, a float64 shortcut."""

    def __init__(self):
        super().__init__()
        self.W = npattn.Parameter(RNG.normal(size=(3, 2)))

    def forward(self, x):
        x = np.asarray(x, np.float64)
        self._x = x.copy()
        return (x.astype(np.float32) @ self.W.data.astype(np.float32)).astype(np.float64) + x[..., :2]

    def backward(self, g):
        self.W.grad += self._x.reshape(-1, 3).T @ g.reshape(-1, 2)
        dx = g @ self.W.data.T
        dx[..., :2] += g
        return dx


def test_the_default_atol_is_not_advised_as_a_change():
    with pytest.raises(ConfigError, match=r"is below what central differences can resolve") as info:
        npattn.gradcheck(Mixed(), RNG.normal(size=(4, 3)))
    assert "leave atol at its default" not in str(info.value) and "this atol is the default's" in str(info.value)


def test_a_callers_atol_is_still_advised_back_to_the_default():
    with pytest.raises(ConfigError, match="or leave atol at its default"):
        npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64),
                         npattn.book_inputs().astype(np.float64), atol=0.0, rtol=0.0)  # fmt: skip
