"""Float16 gradients that sum over many rows (a bias, an embedding row used often, an addend
broadcast over the batch) are summed in float32 and rounded once, as PyTorch's CPU kernels sum half.

NumPy adds the rows of a float16 array one at a time in float16: once a sum reached 256 (spacing
0.25) every addend below 0.125 was dropped, so 3000 rows of about 0.1 summed to 256.0, not about 300.
"""

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F

HALF = 2.0**-11  # float16's relative rounding: the one rounding of a sum done in float32


def _close(got, exact):
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2 * HALF, atol=0)


@pytest.fixture
def rows():
    return (np.random.default_rng(0).random((3000, 4)) * 0.2).astype(np.float16)


def test_bias_backward_sums_in_float32(rows):
    _close(F.bias_backward(rows, (rows.shape,))[1], rows.astype(np.float64).sum(axis=0))


def test_add_backward_sums_a_broadcast_addend_in_float32(rows):
    d_out = rows.reshape(1000, 3, 4)
    _close(F.add_backward(d_out, ((1000, 3, 4), (3, 4)))[1], d_out.astype(np.float64).sum(axis=0))


def test_embedding_backward_adds_an_often_used_id_in_float32(rows):
    weight = np.zeros((5, 4), np.float16)
    ids = np.zeros(3000, dtype=np.int64)
    _, cache = F.embedding_forward(weight, ids)
    (dweight,) = F.embedding_backward(rows, cache)
    _close(dweight[0], rows.astype(np.float64).sum(axis=0))
    assert dweight.dtype == np.float16 and not dweight[1:].any()


def test_a_float16_linear_and_multi_head_attention_give_float64s_bias_gradients():
    x = (np.random.default_rng(1).standard_normal((2, 1000, 8))).astype(np.float16)
    mha = npattn.MultiHeadAttention(8, 8, 1000, 0.0, num_heads=2, qkv_bias=True, rng=123, dtype=np.float16)
    exact = npattn.MultiHeadAttention(8, 8, 1000, 0.0, num_heads=2, qkv_bias=True, rng=123, dtype=np.float64)
    exact.load_state_dict({k: v.astype(np.float64) for k, v in mha.state_dict().items()})
    grad = np.full((2, 1000, 8), 0.1)
    mha(x)
    mha.backward(grad.astype(np.float16))
    exact(x.astype(np.float64))
    exact.backward(grad)
    _close(mha.out_proj.bias.grad, exact.out_proj.bias.grad)  # 2000 rows of 0.1: 200, was 256
