"""A finite input or upstream gradient that the module's dtype cannot hold (70000 into float16,
1e39 into float32) became inf in the cast and every output NaN, with only NumPy's warning; it is
now a DTypeError naming how many entries overflow and the dtype, and nothing changes."""

import numpy as np
import pytest

import npattn
from npattn.errors import DTypeError


@pytest.mark.parametrize(
    ("dtype", "big"), [(np.float16, 70000.0), (np.float32, 1e39)], ids=["float16", "float32"]
)
@pytest.mark.parametrize("cls", [npattn.SelfAttention_v1, npattn.SelfAttention_v2, npattn.Linear])
def test_an_input_that_overflows_the_modules_dtype_is_refused(cls, dtype, big):
    model = cls(3, 4, dtype=dtype)
    x = np.array([[1.0, 2.0, big], [0.5, 0.1, 0.2]])
    with pytest.raises(DTypeError, match=rf"^x: 1 of 6 entries overflow {np.dtype(dtype)} \(largest magnitude"):
        model(x)


def test_integers_that_overflow_float16_are_refused():
    with pytest.raises(DTypeError, match=r"x: 1 of 6 entries overflow float16"):
        npattn.SelfAttention_v2(3, 4, rng=1, dtype=np.float16)([[1, 2, 70000], [0, 0, 0]])


def test_an_upstream_gradient_that_overflows_is_refused_and_nothing_changes():
    model = npattn.SelfAttention_v2(3, 4, rng=1)
    model(np.ones((5, 3)))
    before = [None if p.grad is None else p.grad.copy() for p in model.parameters()]
    with pytest.raises(DTypeError, match=r"^grad_output: 20 of 20 entries overflow float32"):
        model.backward(np.full((5, 4), 1e39))
    for p, grad in zip(model.parameters(), before):
        assert (p.grad is None and grad is None) or np.array_equal(p.grad, grad)
    dx = model.backward(np.ones((5, 4)))  # the forward is still there to differentiate
    assert np.isfinite(dx).all()


def test_values_the_dtype_holds_and_non_finite_ones_pass_as_before():
    model = npattn.SelfAttention_v2(3, 4, rng=1, dtype=np.float16)
    assert np.isfinite(model(np.array([[1.0, 2.0, 60000.0], [0.5, 0.1, 0.2]]) / 1e4)).all()
    with np.errstate(invalid="ignore"):
        out = model(np.array([[1.0, 2.0, np.inf], [0.5, 0.1, 0.2]]))  # already inf: NaN propagates as documented
    assert out.shape == (2, 4)


def test_float16_dropout_near_p_1_gives_torchs_zeros_and_infs():
    from npattn.nn import functional as F

    x = np.full((3, 4), 0.25, dtype=np.float16)
    keep = np.zeros((3, 4), dtype=bool)
    keep[0, 0] = True
    with np.errstate(over="raise", invalid="raise"):  # no warning: the scale's inf is PyTorch's too
        out, cache = F.dropout_forward(x, keep, 0.99999)
        (dx,) = F.dropout_backward(np.ones((3, 4), dtype=np.float16), cache)
    assert out[0, 0] == np.inf and np.count_nonzero(out) == 1 and not np.isnan(out).any()
    assert dx[0, 0] == np.inf and np.count_nonzero(dx) == 1 and not np.isnan(dx).any()
