"""A NumPy scalar dropout rate (np.float16(0.1), np.float32(0.1)) given to the stages and kernels:
1 - p was computed in p's own dtype, so the rescale was 1.11123 instead of 1 / (1 - 0.09998) =
1.11108 (not unbiased any more); the modules, which pass a float, were right. The checked scalar
settings now reach the stage as Python numbers."""

import numpy as np
import pytest

from npattn import kernels
from npattn.nn import functional as F


@pytest.mark.parametrize("p", [np.float16(0.1), np.float32(0.1), np.float64(0.3)], ids=repr)
def test_dropout_scales_by_one_over_one_minus_p_as_a_float(p):
    w, keep = np.ones((1, 3)), np.ones((1, 3), bool)
    out, _ = F.dropout_forward(w, keep, p)
    assert out[0, 0] == 1 / (1 - float(p))


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled"])
@pytest.mark.parametrize("p", [np.float16(0.1), np.float32(0.1)], ids=repr)
def test_kernels_take_a_numpy_scalar_rate_as_its_float(impl, p):
    q = np.random.default_rng(0).standard_normal((4, 3))
    keep = np.random.default_rng(1).random((4, 4)) > 0.3
    got, _ = kernels.attention(q, q, q, impl=impl, dropout_keep=keep, dropout_p=p)
    want, _ = kernels.attention(q, q, q, impl=impl, dropout_keep=keep, dropout_p=float(p))
    np.testing.assert_array_equal(got, want)
    got, _ = F.attention_forward(q, q, q, dropout_keep=keep, dropout_p=p)
    np.testing.assert_array_equal(got, F.attention_forward(q, q, q, dropout_keep=keep, dropout_p=float(p))[0])
