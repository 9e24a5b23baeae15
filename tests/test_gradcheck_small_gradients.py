"""Every tensor's check can fail its gradient with the sign flipped or missing, also when that
tensor's gradient is far below the others' (or below the default atol of 1e-8): such a tensor is
checked with an atol of its own, measured from the differences at step h against 2h, at eps or,
when eps's rounding noise hides it, at a larger step. A gradient below the noise at every step is
named in the report. A backward must add to .grad, not assign it."""

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F

QUERIES = np.random.default_rng(0).standard_normal((4, 3)) * 1e-9  # keys' gradients are ~1e-9
KEYS = np.random.default_rng(1).standard_normal((4, 3))


def _scores_backward(bug):
    def backward(d, cache):
        dq, dk = F.scores_backward(d, cache)
        return dq, {"flip": -dk, "drop": 0 * dk, "x1.01": 1.01 * dk, None: dk}[bug]

    return backward


@pytest.mark.parametrize("bug", ["flip", "drop", "x1.01"])
def test_a_stage_input_with_tiny_gradients_fails_a_wrong_gradient(bug):
    with pytest.raises(npattn.GradcheckError, match="gradient of keys"):
        npattn.gradcheck_stage(F.scores_forward, _scores_backward(bug), [QUERIES, KEYS], names=["queries", "keys"])


def test_the_correct_stage_passes_with_a_margin():
    report = npattn.gradcheck_stage(F.scores_forward, _scores_backward(None), [QUERIES, KEYS], names=["q", "keys"])
    assert report["keys"].allowed < 1e-12 and report["keys"].margin > 100


class TwoScales(npattn.Module):
    """y = concat(tanh(x @ A), s * tanh(x @ B)): B's gradients are s times A's."""

    def __init__(self, s, bug=None):
        super().__init__()
        r = np.random.default_rng(0)
        self.A = npattn.Parameter(r.standard_normal((4, 3)))
        self.B = npattn.Parameter(r.standard_normal((4, 3)))
        self.s, self.bug = s, bug

    def forward(self, x):
        self.x = np.array(x, np.float64)
        self.a, self.b = np.tanh(self.x @ self.A.data), np.tanh(self.x @ self.B.data)
        return np.concatenate([self.a, self.s * self.b], -1)

    def backward(self, g):
        ga, gb = g[..., :3] * (1 - self.a**2), self.s * g[..., 3:] * (1 - self.b**2)
        dB = self.x.T @ gb
        self.A.grad += self.x.T @ ga
        self.B.grad += {"flip": -dB, "drop": 0 * dB, "x1.01": 1.01 * dB, None: dB}[self.bug]
        return ga @ self.A.data.T + gb @ self.B.data.T


X = np.random.default_rng(1).standard_normal((5, 4))


@pytest.mark.parametrize("s", [1e-6, 1e-9])
@pytest.mark.parametrize("bug", ["flip", "drop", "x1.01"])
def test_a_parameter_with_gradients_far_below_the_others_fails_a_wrong_gradient(s, bug):
    with pytest.raises(npattn.GradcheckError, match="gradient of B"):
        npattn.gradcheck(TwoScales(s, bug), X)


@pytest.mark.parametrize("s", [1e-6, 1e-9, 1e-12])
def test_the_correct_module_passes_at_every_scale(s):
    assert npattn.gradcheck(TwoScales(s), X)


def test_a_gradient_below_the_noise_at_every_step_is_named_in_the_report():
    report = npattn.gradcheck(TwoScales(1e-9), X)  # checked at the step whose atol is the smallest
    assert report["B"].step > 1e-6 and f"checked at step {report['B'].step:g}" in str(report)
    report = npattn.gradcheck(TwoScales(1e-12, "flip"), X)  # 1e-12 next to ~1: no step resolves it
    assert report and not report["B"].resolved
    assert "note: B's numerical gradient" in str(report)
    assert "a missing or wrong-signed gradient may pass" in str(report)


class Assigns(npattn.Module):
    def __init__(self, how):
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(0).standard_normal((4, 3)))
        self.how = how

    def forward(self, x):
        self.x = np.array(x, np.float64)
        return np.tanh(self.x @ self.W.data)

    def backward(self, g):
        gz = g * (1 - np.tanh(self.x @ self.W.data) ** 2)
        if self.how == "assign":
            self.W.grad[...] = self.x.T @ gz
        elif self.how == "replace":
            self.W.grad = self.x.T @ gz
        else:
            self.W.grad += self.x.T @ gz
        return gz @ self.W.data.T


@pytest.mark.parametrize("how", ["assign", "replace"])
def test_a_backward_that_assigns_grad_instead_of_adding_fails(how):
    with pytest.raises(npattn.GradcheckError, match=r"W\.grad is not twice the first gradient"):
        npattn.gradcheck(Assigns(how), X)
    assert npattn.gradcheck(Assigns("add"), X)


class Noisy(npattn.Module):
    def __init__(self):
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(0).standard_normal((4, 3)))

    def forward(self, x):
        self.x = np.array(x, np.float64)
        return self.x @ self.W.data + 1e-3 * np.random.default_rng().standard_normal((len(self.x), 3))

    def backward(self, g):
        self.W.grad += self.x.T @ g
        return g @ self.W.data.T


def test_a_random_forward_is_refused_with_its_reason():
    with pytest.raises(npattn.ConfigError, match="gradcheck: two forwards of the same input differ"):
        npattn.gradcheck(Noisy(), X)
    noisy = lambda a: (a + 1e-3 * np.random.default_rng().random(a.shape), None)  # noqa: E731
    with pytest.raises(npattn.ConfigError, match="gradcheck_stage: two forwards of the same input differ"):
        npattn.gradcheck_stage(noisy, lambda d, c: (d,), [X])


class FirstInputOnly(npattn.Module):
    """A backward that keeps its first forward's input: right only for the first call."""

    def __init__(self):
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(0).standard_normal((4, 3)))
        self.first = None

    def forward(self, x):
        self.first = np.array(x, np.float64) if self.first is None else self.first
        return np.array(x, np.float64) @ self.W.data

    def backward(self, g):
        self.W.grad += self.first.T @ g
        return g @ self.W.data.T


def test_a_backward_that_keeps_its_first_forward_fails():
    with pytest.raises(npattn.GradcheckError, match="gradient of W is wrong"):
        npattn.gradcheck(FirstInputOnly(), X)


def test_a_small_row_of_a_tensor_with_huge_entries_elsewhere_is_judged_on_its_own():
    from npattn.nn import functional as F

    rs = np.random.default_rng(0)
    x, W = rs.standard_normal((5, 3)), rs.standard_normal((3, 2))
    x[:, 0] *= 1e6

    def row_doubled(d, cache):
        dx, dW = F.project_backward(d, cache)
        dW = dW.copy()
        dW[2] *= 2
        return dx, dW

    with pytest.raises(npattn.GradcheckError, match=r"atol \+ 0\.01% of its own value"):
        npattn.gradcheck_stage(F.project_forward, row_doubled, [x, W], eps=1e-3)
    assert npattn.gradcheck_stage(F.project_forward, F.project_backward, [x, W], eps=1e-3)


def test_a_staircase_is_not_averaged_into_a_slope():
    x = np.random.default_rng(7).standard_normal((4, 3))
    with pytest.raises(npattn.GradcheckError):
        npattn.gradcheck_stage(lambda a: (np.round(a * 1e3) / 1e3, None), lambda d, c: (d,), [x])


class Tanh(npattn.Module):
    """y = tanh(x @ W), its backward scaled by ``factor`` (1: right)."""

    def __init__(self, factor=1.0):
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(0).standard_normal((4, 2)))
        self.factor = factor

    def forward(self, x):
        self.x = np.array(x, np.float64)
        self.y = np.tanh(self.x @ self.W.data)
        return self.y

    def backward(self, g):
        gz = g * (1 - self.y**2)
        self.W.grad += self.factor * (self.x.T @ gz)
        return gz @ self.W.data.T


@pytest.mark.parametrize("eps", [1e-2, 1.0])
def test_an_eps_too_large_is_named_not_the_backward(eps):
    with pytest.raises(npattn.ConfigError, match=rf"eps={eps:g} is too large for W: .* \(truncation error"):
        npattn.gradcheck(Tanh(), X, eps=eps)
    with pytest.raises(npattn.ConfigError, match=r"is too large for input0"):
        z = np.random.default_rng(2).standard_normal((3, 4))
        npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [z], eps=eps)


@pytest.mark.parametrize("factor", [1.03, 1.001])
def test_a_slightly_wrong_gradient_of_a_tensor_with_tiny_gradients_fails(factor):
    """W's gradients are ~1e-7 next to x's ~1: 1e-8 would let 3% pass; its own atol does not."""
    with pytest.raises(npattn.GradcheckError, match="gradient of W is wrong"):
        npattn.gradcheck(Tanh(factor), X * 1e-7)
    assert npattn.gradcheck(Tanh(), X * 1e-7)


def test_a_module_in_another_dtype_is_told_what_the_float64_copy_leaves_unchecked():
    report = npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=1), npattn.book_inputs())
    assert "note: checked on a float64 copy of this float32 module" in str(report)
    report = npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64), npattn.book_inputs())
    assert "float64 copy" not in str(report)


@pytest.mark.parametrize("s", [1.58e-12, 2.51e-12])
def test_a_tensor_resolved_only_for_a_sign_flip_is_not_called_resolved(s):
    """B's gradient (~1e-12) was called resolved where a sign flip failed but a missing gradient
    passed (allowed 1.4e-12 against a gradient of 1.4e-12): the check now asks that a missing one
    fail, and otherwise names the tensor in a note."""
    report = npattn.gradcheck(TwoScales(s, "drop"), X, raise_exception=False)
    assert not report["B"].resolved or not report.passed
    assert not report.passed or "a missing or wrong-signed gradient may pass" in str(report)
    with pytest.raises(npattn.GradcheckError, match="gradient of B"):  # judged at the sharpest step all the same
        npattn.gradcheck(TwoScales(s, "flip"), X)
