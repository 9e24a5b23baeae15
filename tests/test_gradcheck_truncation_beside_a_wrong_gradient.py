"""A large eps is blamed only when every failing tensor is failed by its truncation error (it shrinks
at eps / 2): a wrong gradient beside a tensor with truncation error fails the backward with a
GradcheckError naming it (the ConfigError said the differences, not the backward, were wrong)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, GradcheckError
from npattn.nn import functional as F

X = npattn.book_inputs().astype(np.float64)


class SignFlippedDx(npattn.SelfAttention_v1):
    def backward(self, grad_output):
        return -super().backward(grad_output)


class SignFlippedWValue(npattn.SelfAttention_v1):
    def backward(self, grad_output):
        dx = super().backward(grad_output)
        self.W_value.grad *= -1
        return dx


@pytest.mark.parametrize(("cls", "eps", "name"), [(SignFlippedDx, 1e-2, "x"), (SignFlippedDx, 3e-3, "x"),
                                                  (SignFlippedWValue, 1e-2, "W_value"),
                                                  (SignFlippedWValue, 3e-3, "W_value")])  # fmt: skip
def test_a_wrong_gradient_beside_truncation_error_fails_the_backward(cls, eps, name):
    with pytest.raises(GradcheckError, match=f"gradient of {name} is wrong"):
        npattn.gradcheck(cls(3, 2, rng=123, dtype=np.float64), X, eps=eps)


def test_a_wrong_stage_gradient_beside_truncation_error_fails_the_backward():
    def backward(d_out, cache):
        dx, dscale, dshift = F.layer_norm_backward(d_out, cache)
        return dx, dscale, -dshift

    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(4)]
    with pytest.raises(GradcheckError, match="gradient of input2 is wrong"):
        npattn.gradcheck_stage(lambda x, s, h: F.layer_norm_forward(x, s, h, 1e-5), backward, inputs, eps=3e-2)


def test_a_right_backward_with_too_large_an_eps_is_still_refused_as_eps():
    with pytest.raises(ConfigError, match=r"eps=0\.1 is too large"):
        npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), X, eps=0.1)


class SlightlyOffDx(npattn.SelfAttention_v1):
    def backward(self, grad_output):
        return super().backward(grad_output) * (1 + 1e-3)


@pytest.mark.parametrize("eps", [1e-2, 3e-2])
def test_a_small_error_within_anothers_truncation_noise_is_found_at_a_smaller_step(eps):
    # a 0.1% error in dx lies within the noise that W_key's truncation puts on x's differences at eps; at
    # smaller steps x's differences settle off the backward, so the backward is called wrong (it was "eps
    # too large", the advice that then found the error)
    with pytest.raises(GradcheckError, match=r"gradient of x is wrong.*the differences settle at .* so the backward"):
        npattn.gradcheck(SlightlyOffDx(3, 2, rng=123, dtype=np.float64), X, eps=eps)
    with pytest.raises(GradcheckError, match="gradient of x is wrong"):
        npattn.gradcheck(SlightlyOffDx(3, 2, rng=123, dtype=np.float64), X)


@pytest.mark.parametrize("seed", [8, 12])
def test_a_tensor_failing_only_element_by_element_is_tested_for_truncation(seed):
    npattn.manual_seed(seed)
    with pytest.raises(ConfigError, match=r"eps=0\.003 is too large for layers"):
        npattn.gradcheck(npattn.FeedForward({"emb_dim": 3}, dtype=np.float64), X, eps=0.003)
