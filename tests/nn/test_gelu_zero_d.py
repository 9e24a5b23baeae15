"""GELU of a 0-d array or a NumPy scalar gives the 1-element answer, forward and backward (it was a
NumPy TypeError from writing into a scalar), as torch's GELU takes 0-d tensors."""

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F


@pytest.mark.parametrize(
    "value", [np.array(0.7), np.float64(-1.3), np.array(2.0, np.float32), np.array(-3.0, np.float16), np.array(2)]
)
def test_zero_d_gelu_equals_the_one_element_gelu(value):
    x = np.asarray(value)
    out, cache = F.gelu_forward(x)
    one, one_cache = F.gelu_forward(x.reshape(1))
    assert out.shape == () and out.dtype == one.dtype and out == one[0]
    (dx,) = F.gelu_backward(np.ones_like(out), cache)
    (d_one,) = F.gelu_backward(np.ones_like(one), one_cache)
    assert dx.shape == () and dx == d_one[0]
    assert npattn.GELU()(x) == one[0]


def test_zero_d_gelu_passes_gradcheck_stage():
    assert npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [np.array(0.7)])
