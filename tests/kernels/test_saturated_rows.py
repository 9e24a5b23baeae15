"""Rows whose softmax is one-hot in their dtype (scores far apart, below FAST_SCORE_LIMIT): the
fused and tiled paths give the reference path's score gradients there, about 0, instead of a
rounding residue of eps * |G| * |values| * |keys| in d_queries and d_keys."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn import kernels as K


def _saturated_inputs(bound: float, causal: bool) -> tuple[np.ndarray, ...]:
    """(3, 40, 8) float64 queries, keys, values, upstream gradient; sqrt(k) max|q| max|k| = bound."""
    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal((3, 40, 8)) for _ in range(4))
    c = np.sqrt(bound / (np.sqrt(8) * np.abs(q).max() * np.abs(k).max()))
    return q * c, k * c, v * 10, g


@pytest.mark.parametrize(("bound", "causal"), [(3e5, True), (9e5, True), (9e5, False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("impl", "blocks"), [("fused", {}), ("tiled", {}), ("tiled", {"block_q": 8, "block_k": 16})])
def test_fast_paths_give_the_reference_score_gradients_on_one_hot_rows(impl, blocks, dtype, bound, causal):
    """Every row one-hot: the true d_queries and d_keys are ~0 (below 1e-14); the old residue was
    eps * |G| * |values| * |keys| / sqrt(k) (3e-4 in float32, 1e-12 in float64)."""
    q, k, v, g = _saturated_inputs(bound, causal)
    assert bound < K.FAST_SCORE_LIMIT  # the fast paths run
    _, truth_cache = K.attention(q, k, v, causal=causal, impl="reference")
    truth = K.attention_backward(g, truth_cache)
    _, cache = K.attention(*(a.astype(dtype) for a in (q, k, v)), causal=causal, impl=impl, **blocks)
    assert cache[0] == impl
    got = K.attention_backward(g.astype(dtype), cache)
    residue = np.finfo(dtype).eps * np.abs(g).max() * np.abs(v).max() * np.abs(k).max() / np.sqrt(8)
    for name, a, want in zip(("d_queries", "d_keys"), got, truth):
        assert np.abs(want).max() < 1e-14
        err = np.abs(a - want).max()
        assert err <= 1e-6 * residue, f"{impl} {name}: |fast - reference| = {err:.3g} (residue {residue:.3g})"
    np.testing.assert_allclose(got[2], truth[2], rtol=0, atol=64 * np.finfo(dtype).eps * np.abs(truth[2]).max())


@pytest.mark.parametrize("impl", ["fused", "tiled", "auto"])
def test_a_module_with_one_hot_rows_gets_the_reference_weight_gradients(impl):
    """CausalAttention, float32, n = 256 (auto picks a fast path): unit-norm tokens, W_query =
    W_key = 200 I, so each token attends only to itself (scores 4e4 / sqrt(8) apart from the
    rest): W_query's gradient is ~0 on every path."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 256, 8))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    g = rng.standard_normal((1, 256, 8)).astype(np.float32)
    grads = {}
    for path in ("reference", impl):
        m = npattn.CausalAttention(8, 8, 256, 0.0, rng=1, impl=path)
        m.W_query.weight.data[...] = m.W_key.weight.data[...] = 200 * np.eye(8)
        m.W_value.weight.data[...] = np.eye(8)
        m(x.astype(np.float32))
        m.backward(g)
        grads[path] = {name: p.grad for name, p in m.named_parameters()}
    assert np.abs(grads["reference"]["W_query.weight"]).max() < 1e-20
    assert np.abs(grads[impl]["W_query.weight"]).max() < 1e-20  # was 3e-5: the rounding residue
    np.testing.assert_allclose(grads[impl]["W_value.weight"], grads["reference"]["W_value.weight"], rtol=1e-6)
