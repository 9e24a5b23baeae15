"""Values of width 0 (kv = 0) on every path: the fused backward reshaped (-1, n, 0), which NumPy
cannot resolve for an empty array, and raised a raw ValueError; every path now returns the
reference path's empty context and gradients."""

import numpy as np
import pytest

from npattn import kernels
from npattn.kernels.fused import fused_backward, fused_forward


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("impl", ["fused", "tiled", "auto"])
def test_zero_width_values_match_the_reference(lead, causal, impl):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, *lead, 7, 5))
    v = np.zeros((*lead, 7, 0))
    ref, ref_cache = kernels.attention(q, k, v, causal=causal, impl="reference")
    out, cache = kernels.attention(q, k, v, causal=causal, impl=impl)
    assert out.shape == ref.shape == (*lead, 7, 0)
    g = np.zeros(out.shape)
    for got, want in zip(kernels.attention_backward(g, cache), kernels.attention_backward(g, ref_cache)):
        assert got.shape == want.shape and np.array_equal(got, want)


def test_fused_pair_directly():
    q = np.ones((7, 5))
    out, cache = fused_forward(q, q, np.zeros((7, 0)))
    d_q, d_k, d_v = fused_backward(np.zeros((7, 0)), cache)
    assert out.shape == d_v.shape == (7, 0) and d_q.shape == d_k.shape == (7, 5)
    assert not d_q.any() and not d_k.any()
