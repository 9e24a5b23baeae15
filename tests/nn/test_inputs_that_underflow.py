"""An input or upstream gradient whose nonzero entries all underflow the module's dtype (float64
1e-50 into float32) became all zeros without a word, while one that overflows was refused; both are
refused now, nothing changed. Partial underflow (a few tiny entries among normal ones) is rounding."""

import numpy as np
import pytest

import npattn
from npattn.errors import DTypeError


def test_an_input_that_underflows_entirely_is_refused():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    with pytest.raises(DTypeError, match=r"^x: every nonzero entry underflows float32 \(largest magnitude 8\.9e-51\)"):
        model(npattn.book_inputs().astype(np.float64) * 1e-50)
    float64 = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    assert np.abs(float64(npattn.book_inputs().astype(np.float64) * 1e-50)).max() > 0


def test_an_upstream_gradient_that_underflows_entirely_is_refused():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    model(npattn.book_inputs())
    with pytest.raises(DTypeError, match=r"^grad_output: every nonzero entry underflows float32"):
        model.backward(np.full((6, 2), 1e-60))
    model.backward(np.ones((6, 2), np.float32))  # the forward is still there: nothing was changed


def test_zeros_and_partial_underflow_pass():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    model(np.zeros((6, 3)))
    x = npattn.book_inputs().astype(np.float64)
    x[0, 0] = 1e-50
    model(x)


def test_a_grad_that_rounds_to_zero_is_a_zero_update_in_step():
    """The refusal is for module inputs and upstream gradients only: a ``.grad`` that rounds to 0 in
    the parameter's dtype is a zero update, as in torch, and the other parameters still step."""
    from npattn.nn.module import Parameter
    from npattn.optim import SGD

    p, q = Parameter(np.ones(3, np.float16)), Parameter(np.ones(3, np.float16))
    p.grad, q.grad = np.full(3, 1e-8, np.float32), np.full(3, 0.5, np.float32)
    SGD([p, q], lr=0.1, momentum=0.9).step()
    np.testing.assert_array_equal(p.data, np.ones(3, np.float16))
    np.testing.assert_array_equal(q.data, np.full(3, 0.95, np.float16))
