"""An eps far beyond the scale on which the loss is smooth is named as too large, never taken for
a wrong backward (eps=15 on the book's inputs: the differences' error did not halve at 7.5, so a
correct SelfAttention_v1 was called wrong); smaller steps are tried down to 1e-6. A wrong backward
still fails at large eps, and inputs no single eps can check in float64 are said to be so."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, GradcheckError
from npattn.nn import functional as F


def _module():
    return npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)


X = npattn.book_inputs().astype(np.float64)


@pytest.mark.parametrize("eps", [1.0, 15.0, 50.0, 100.0])
def test_a_correct_module_at_a_huge_eps_is_told_eps_is_too_large(eps):
    with pytest.raises(ConfigError, match=rf"eps={eps:g} is too large for W_query"):
        npattn.gradcheck(_module(), X, eps=eps)


@pytest.mark.parametrize(("forward", "backward"), [(F.gelu_forward, F.gelu_backward),
                                                   (F.attention_forward, F.attention_backward)])  # fmt: skip
def test_a_correct_stage_at_a_huge_eps_is_told_eps_is_too_large(forward, backward):
    inputs = [np.random.default_rng(2).standard_normal((3, 5))]
    if forward is F.attention_forward:
        inputs = [np.random.default_rng(k).standard_normal((4, 3)) for k in range(3)]
    with pytest.raises(ConfigError, match=r"eps=20 is too large for input"):
        npattn.gradcheck_stage(forward, backward, inputs, eps=20.0)


def test_inputs_of_wide_magnitudes_at_a_large_eps_are_not_called_wrong():
    x = np.random.default_rng(17).standard_normal((6, 3))
    x[0] *= 1e6
    x[1] /= 1e6
    for eps in (0.01, 0.1, 1.0):
        with pytest.raises(ConfigError, match="is too large for"):
            npattn.gradcheck(_module(), x, eps=eps)


def test_inputs_no_eps_can_check_are_said_to_be_so():
    x = np.random.default_rng(17).standard_normal((6, 3))
    x[0] *= 1e4
    x[1] /= 1e4
    for eps in (1.2e-6, 6e-6):  # 1.2e-6: the smallest eps float64 allows at 1e4 (it was told to use a smaller one)
        with pytest.raises(ConfigError, match="no single eps can check these inputs in float64") as info:
            npattn.gradcheck(_module(), x, eps=eps)
        assert "use a smaller eps" not in str(info.value)


@pytest.mark.parametrize("eps", [1e-4, 1e-3, 1e-2])
@pytest.mark.parametrize("factor", [1.01, -1.0])
def test_a_wrong_backward_still_fails_at_a_large_eps(monkeypatch, eps, factor):
    right = F.gelu_backward

    def wrong(d_out, cache):
        return tuple(g * factor for g in right(d_out, cache))

    inputs = [np.random.default_rng(2).standard_normal((3, 5))]
    with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
        npattn.gradcheck_stage(F.gelu_forward, wrong, inputs, eps=eps)
    if eps < 1e-2:  # the right one passes there (at 1e-2 its truncation error is named: eps too large)
        npattn.gradcheck_stage(F.gelu_forward, right, inputs, eps=eps)
    else:
        with pytest.raises(ConfigError, match="is too large for input0"):
            npattn.gradcheck_stage(F.gelu_forward, right, inputs, eps=eps)


@pytest.mark.parametrize("factor", [-1.0, 0.0, 1.1, 1.0001])
@pytest.mark.parametrize("eps", [0.1, 15.0])
def test_a_wrong_module_at_a_huge_eps_is_called_wrong_not_eps(factor, eps):
    """A sign flip's error halved at eps / 2 (its truncation part went) but stayed a million times the
    allowed: it was called eps's fault. At smaller steps the differences settle off the backward."""

    class Wrong(npattn.SelfAttention_v1):
        def backward(self, grad_output):
            dx = super().backward(grad_output)
            self.W_query.grad *= factor
            return dx

    with pytest.raises(GradcheckError, match=r"gradient of W_query is wrong.*the differences settle at"):
        npattn.gradcheck(Wrong(3, 2, rng=123, dtype=np.float64), X, eps=eps)


@pytest.mark.parametrize("eps", [0.3, 15.0, 50.0])
def test_a_wrong_stage_at_a_huge_eps_is_called_wrong_not_eps(eps):
    def wrong(d_out, cache):
        return tuple(g * 1.01 for g in F.gelu_backward(d_out, cache))

    inputs = [np.random.default_rng(2).standard_normal((3, 5))]
    with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
        npattn.gradcheck_stage(F.gelu_forward, wrong, inputs, eps=eps)


@pytest.mark.parametrize("eps", [45.0, 100.0])
def test_a_nearly_linear_loss_far_out_is_not_taken_for_settled_differences(eps):
    """Far out GELU is nearly linear: secants at eps and eps / 2 agree to 1% without being near 0,
    and a correct network was called wrong; the differences are judged settled at the last step only."""
    net = npattn.Sequential(npattn.Linear(3, 4, rng=1, dtype=np.float64), npattn.GELU())
    x = np.random.default_rng(3).standard_normal((2, 3))
    with pytest.raises(ConfigError, match="is too large for"):
        npattn.gradcheck(net, x, eps=eps)
