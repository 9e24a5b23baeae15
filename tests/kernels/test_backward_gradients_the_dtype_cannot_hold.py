"""An upstream gradient the forward inputs' dtype cannot hold is refused by the kernels' and the
functional attention backward, as a module refuses it: a float32 or float16 cache given 1e300 or
1e5 in float64 returned inf gradients."""

import numpy as np
import pytest

import npattn
from npattn.errors import DTypeError
from npattn.nn import functional as F


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
@pytest.mark.parametrize(("dtype", "big"), [(np.float32, 1e300), (np.float16, 1e5)])
def test_kernels_attention_backward_refuses_it(impl, dtype, big):
    q = np.ones((5, 4), dtype)
    _, cache = npattn.kernels.attention(q, q, q, impl=impl)
    with pytest.raises(DTypeError, match=f"entries overflow {np.dtype(dtype).name}"):
        npattn.kernels.attention_backward(np.full((5, 4), big), cache)
    grads = npattn.kernels.attention_backward(np.full((5, 4), 1.0), cache)  # one it holds: as before
    assert all(g.dtype == dtype and np.isfinite(g).all() for g in grads)


def test_the_functional_float16_path_refuses_it():
    q = np.ones((5, 4), np.float16)
    _, cache = F.attention_forward(q, q, q)
    with pytest.raises(DTypeError, match="d_values: 20 of 20 entries overflow float16"):
        F.attention_backward(np.full((5, 4), 1e5), cache)


def test_mixed_dtypes_are_judged_by_each_gradients_own_dtype():
    """float16 queries beside float32 keys and values: a float32 upstream gradient of 1e5 gives a
    float16 d_queries it can hold (it was refused as overflowing float16, the smallest input dtype)."""
    q = np.full((1, 4, 3), 0.5, np.float16)
    kv = np.linspace(0.1, 1.0, 12, dtype=np.float32).reshape(1, 4, 3)
    out, cache = npattn.kernels.attention(q, kv, kv)
    grads = npattn.kernels.attention_backward(np.full(out.shape, 1e5, np.float32), cache)
    assert [g.dtype for g in grads] == [np.float16, np.float32, np.float32]
    assert all(np.isfinite(g).all() for g in grads)
