"""gradcheck and gradcheck_stage refuse what would make their verdict untrustworthy: an eps too
small for float64, a forward output holding NaN, a module without backward, kwargs that are not a
dict; and a backward that edits its upstream gradient in place does not change the check."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F


class Tanh(npattn.Module):
    """y = tanh(x @ W): a correct backward that, after computing its gradients, doubles
    grad_output in place when ``edit`` is set."""

    def __init__(self, edit: bool = False, scale: float = 1.0) -> None:
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(0).standard_normal((4, 3)) * scale)
        self.edit = edit

    def forward(self, x: np.ndarray) -> np.ndarray:
        self._x = np.array(x, dtype=self.W.data.dtype)
        self._h = np.tanh(self._x @ self.W.data)
        return self._h

    def backward(self, g: np.ndarray) -> np.ndarray:
        dh = g * (1 - self._h**2)
        self.W.grad = (0 if self.W.grad is None else self.W.grad) + self._x.T @ dh
        dx = dh @ self.W.data.T
        if self.edit:
            g *= 2
        return dx


X = np.random.default_rng(1).standard_normal((5, 4))


def test_a_backward_that_edits_its_grad_output_after_use_passes():
    assert npattn.gradcheck(Tanh(edit=True), X)


def test_a_stage_backward_that_edits_its_d_out_after_use_passes():
    def backward(d, cache):
        grads = F.scores_backward(d, cache)
        d *= 2
        return grads

    q, k = np.random.default_rng(2).standard_normal((2, 6, 2))
    assert npattn.gradcheck_stage(F.scores_forward, backward, [q, k])


@pytest.mark.parametrize("eps", [1e-30, 1e-12, 5e-11])
def test_an_eps_too_small_for_float64_is_refused(eps):
    with pytest.raises(npattn.ConfigError, match="too small for float64"):
        npattn.gradcheck(Tanh(), X, eps=eps)
    with pytest.raises(npattn.ConfigError, match="too small for float64"):
        npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [X, X], eps=eps)


def test_the_eps_bound_scales_with_the_largest_magnitude():
    small = Tanh(scale=0.1)
    npattn.gradcheck(small, X / 10, eps=1e-10, raise_exception=False)  # the bound itself, magnitudes below 1
    with pytest.raises(npattn.ConfigError, match=r"the largest is 1.3e\+03\): .*use eps >= 1.4e-07"):
        npattn.gradcheck(Tanh(scale=1e-3), X * 1e3, eps=1e-8)
    npattn.gradcheck(Tanh(scale=1e-3), X * 1e3, eps=1.4e-7, raise_exception=False)  # the advice is taken


def test_a_forward_output_holding_nan_is_refused_as_such():
    def forward(a):
        return a * np.nan, None

    with pytest.raises(npattn.ConfigError, match="the forward output is not finite"):
        npattn.gradcheck_stage(forward, lambda d, c: (d,), [X])

    class NanOut(Tanh):
        def forward(self, x):
            return super().forward(x) * np.nan

    with pytest.raises(npattn.ConfigError, match="the forward output is not finite"):
        npattn.gradcheck(NanOut(), X)


def test_a_module_without_backward_is_a_config_error():
    class NoBackward(npattn.Module):
        def __init__(self):
            super().__init__()
            self.W = npattn.Parameter(np.ones((4, 3)))

        def forward(self, x):
            return np.asarray(x) @ self.W.data

    with pytest.raises(npattn.ConfigError, match="needs a module with a backward: NoBackward does not implement"):
        npattn.gradcheck(NoBackward(), X)


@pytest.mark.parametrize("kwargs", [5, [("scale", 0.5)], {1: 0.5}])
def test_kwargs_that_are_not_a_dict_of_names_are_refused(kwargs):
    with pytest.raises(npattn.ConfigError, match="gradcheck_stage: kwargs"):
        npattn.gradcheck_stage(F.softmax_forward, F.softmax_backward, [X], kwargs=kwargs)


def test_the_advised_bounds_are_accepted():
    """The advice is rounded to the side the setting must stay on: "use eps >= 1.2e-06" was refused
    itself (the bound was 1.234e-06), as was an atol just under "use atol < 0.00013" (1.29e-4)."""
    from npattn.nn import functional as F

    x = np.full((2, 3), 12300.0)
    x[1, 1] = 12340.0
    with pytest.raises(npattn.ConfigError, match=r"use eps >= 1.3e-06"):
        npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [x], eps=1e-6)
    npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [x], eps=1.3e-6, raise_exception=False)

    def identity(a):
        return a * 1.0, None

    with pytest.raises(npattn.ConfigError, match=r"use atol < 0.00012"):
        npattn.gradcheck_stage(identity, lambda d, c: (d,), [np.ones(7)], atol=1.0)
    npattn.gradcheck_stage(identity, lambda d, c: (d,), [np.ones(7)], atol=0.00012)
