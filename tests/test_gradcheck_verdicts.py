"""gradcheck's verdicts: a forward in float32 is named in the failure; the default atol includes the
finite differences' rounding noise (a large output next to a small one); a caller's atol must let
every tensor fail with its sign flipped; the relative error of a zero reference is inf."""

import numpy as np
import pytest

import npattn
from npattn.gradcheck import difference_noise, max_relative_error


class Two(npattn.Module):
    """y = concat(x @ A, 1e-4 * (x @ B)), A ~ 100: outputs ~100 next to ~1e-4."""

    def __init__(self, bug=None):
        super().__init__()
        r = np.random.default_rng(0)
        self.A = npattn.Parameter(r.standard_normal((4, 3)) * 100)
        self.B = npattn.Parameter(r.standard_normal((4, 3)) * 1e-4)
        self.bug = bug

    def forward(self, x):
        self.x = np.array(x, np.float64)
        return np.concatenate([self.x @ self.A.data, 1e-4 * (self.x @ self.B.data)], -1)

    def backward(self, g):
        g = np.asarray(g, np.float64)
        gA, gB = g[..., :3], 1e-4 * g[..., 3:]
        dB = self.x.T @ gB * (-1 if self.bug == "signB" else 1)
        self.A.grad += self.x.T @ gA
        self.B.grad += dB
        return gA @ self.A.data.T + gB @ self.B.data.T


X = np.random.default_rng(1).standard_normal((5, 4))


def test_a_correct_module_with_outputs_of_very_different_scales_passes():
    report = npattn.gradcheck(Two(), X)
    assert report.atol > 1e-8  # the rounding noise of the large output, not the fixed floor
    with pytest.raises(npattn.GradcheckError, match="gradient of B"):
        npattn.gradcheck(Two("signB"), X)


def test_a_callers_atol_must_let_every_tensor_fail_with_its_sign_flipped():
    with pytest.raises(npattn.ConfigError, match=r"atol=0\.001 is too wide for B"):
        npattn.gradcheck(Two("signB"), X, atol=1e-3)


def test_a_forward_in_float32_is_named_in_the_failure():
    x = np.random.default_rng(2).standard_normal((3, 4))
    with pytest.raises(npattn.GradcheckError, match="the forward returns float32"):
        npattn.gradcheck_stage(lambda a: (a.astype(np.float32) ** 2, a), lambda d, c: (2 * c * d,), [x])
    inside = lambda a: ((a.astype(np.float32) ** 2).astype(np.float64), a)  # noqa: E731
    with pytest.raises(npattn.GradcheckError, match="all float32 numbers"):
        npattn.gradcheck_stage(inside, lambda d, c: (2 * c * d,), [x])
    report = npattn.gradcheck_stage(lambda a: (a**2, a), lambda d, c: (2 * c * d,), [x])
    assert report and "note" not in str(report)


def test_relative_error_of_a_zero_reference_is_inf_not_a_huge_number():
    assert max_relative_error(np.array([1e-20, 0.0]), np.array([0.0, 1.0])) == float("inf")
    assert max_relative_error(np.array([1e-3, 0.0]), np.array([2.0, 0.0])) == pytest.approx(5e-4)
    assert max_relative_error(np.zeros(2), np.zeros(2)) == 0.0


def test_difference_noise_scales_with_the_loss():
    G = np.ones(3)
    assert difference_noise(np.full(3, 100.0), G, 1e-6) == pytest.approx(10 * 2.220446049250313e-16 * 300 / 1e-6)
