"""Multi-head attention on the fast paths: the tiled path run slab by slab over the cores (BLAS on
one thread each) or one slab after another, the fused path's causal row blocks, heads read in
place from (b, n, h, hd) memory, and stage 1 as one product (``F.project_qkv_*``). Every path
equals the reference (float64 within 1e-12) with and without the causal mask, for n not a
multiple of any block size and n < context_length, and passes gradient checks; planted bugs in
the new backward code are rejected."""

import threading

import numpy as np
import pytest

import npattn
from npattn import kernels
from npattn.kernels import blocks, tiled
from npattn.nn import functional as F

SLAB_MODES = ["serial", "slabs", "slabs without a BLAS limit"]


def _set_slab_mode(mode, monkeypatch):
    if mode == "serial":
        monkeypatch.setattr(blocks, "MIN_PARALLEL_ELEMENTS", 1 << 60)
    else:
        monkeypatch.setattr(blocks, "MIN_PARALLEL_ELEMENTS", 0)
    if mode == "slabs without a BLAS limit":
        monkeypatch.setattr(blocks, "_blas", False)
    return mode


@pytest.fixture(params=SLAB_MODES)
def slab_mode(request, monkeypatch):
    """serial: everything in the calling thread; slabs: slabs split over the pool (BLAS on one
    thread when threadpoolctl is installed); without a BLAS limit: the fallback of run_slabs."""
    return _set_slab_mode(request.param, monkeypatch)


@pytest.fixture(params=SLAB_MODES[:2])
def module_slab_mode(request, monkeypatch):
    """The modules: serial and split over the pool (the fallback is the serial path's code)."""
    return _set_slab_mode(request.param, monkeypatch)


def heads(rng, b, n, h, hd):
    """queries, keys, values, G as (b, h, n, hd) views of (b, n, h, hd) memory, like split_heads."""
    return [rng.standard_normal((b, n, h, hd)).transpose(0, 2, 1, 3) for _ in range(4)]


def reference(q, k, v, G, causal):
    mask = F.causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    out, cache = F.attention_forward(q, k, v, mask=mask)
    return out, F.attention_backward(G, cache)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("impl,blocks_qk", [("fused", {}), ("tiled", {}), ("tiled", {"block_q": 48, "block_k": 40})])
@pytest.mark.parametrize("n", [1, 5, 131])
def test_heads_equal_the_reference(rng, slab_mode, impl, blocks_qk, causal, n):
    q, k, v, G = heads(rng, 2, n, 3, 4)
    out, cache = kernels.attention(q, k, v, causal=causal, impl=impl, **blocks_qk)
    grads = kernels.attention_backward(G, cache)
    out_ref, grads_ref = reference(q, k, v, G, causal)
    np.testing.assert_allclose(out, out_ref, rtol=0, atol=1e-12)
    for g, r in zip(grads, grads_ref):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-12)
    if impl == "tiled":  # laid out like the inputs: merging the heads back is a view
        for a in (out, *grads):
            assert a.transpose(0, 2, 1, 3).flags.c_contiguous


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("per_group", [1, 2, 5])
@pytest.mark.parametrize("n", [1, 29])
def test_tiled_head_groups_equal_the_reference(rng, slab_mode, monkeypatch, per_group, causal, n):
    """Several heads per step (5 heads in groups of 1, 2 + 2 + 1, or all 5) give the reference's numbers."""
    monkeypatch.setattr(tiled, "_per_group", lambda lead, block_elements, itemsize: min(per_group, lead[-1]))
    q, k, v, G = heads(rng, 2, n, 5, 4)
    out, cache = kernels.attention(q, k, v, causal=causal, impl="tiled", block_q=7, block_k=5)
    grads = kernels.attention_backward(G, cache)
    out_ref, grads_ref = reference(q, k, v, G, causal)
    np.testing.assert_allclose(out, out_ref, rtol=0, atol=1e-12)
    for g, r in zip(grads, grads_ref):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradcheck_tiled_head_groups(rng, monkeypatch, causal):
    monkeypatch.setattr(tiled, "_per_group", lambda lead, block_elements, itemsize: min(2, lead[-1]))
    q, k, v, _ = heads(rng, 1, 8, 3, 2)  # groups of 2 + 1 heads
    kwargs = {"impl": "tiled", "causal": causal, "block_q": 3, "block_k": 2}
    assert npattn.gradcheck_stage(kernels.attention, kernels.attention_backward, [q, k, v], kwargs=kwargs)


def test_per_group_fills_the_budget_and_every_core():
    assert tiled._per_group((8, 12), 128 * 1024, 4) == 2  # two (128, 1024) float32 blocks in GROUP_BYTES
    assert tiled._per_group((8, 12), 128 * 1024, 8) == 1
    assert tiled._per_group((1, 12), 16, 4) == min(12, -(-12 // blocks.num_workers()))
    assert tiled._per_group((3,), 10**9, 4) == 1


@pytest.mark.parametrize("shape,row0,col0", [((5, 5), 0, 0), ((3, 7), 4, 0), ((2, 4, 6), 9, 5), ((4, 2), 7, 6)])
def test_causal_band_is_the_books_mask(shape, row0, col0):
    """causal_band marks exactly what causal_fill masks (key col0 + j after query row0 + i)."""
    block = np.zeros(shape)
    band, above = blocks.causal_band(block, row0, col0)
    np.copyto(band, 1.0, where=above)
    expected = np.zeros(shape)
    blocks.causal_fill(expected.reshape(-1, *shape[-2:])[0], row0, col0, 1.0)
    np.testing.assert_array_equal(block.reshape(-1, *shape[-2:])[0], expected.reshape(-1, *shape[-2:])[0])
    with pytest.raises(ValueError):
        blocks.causal_band(block, col0 - 1, col0) if col0 else blocks.causal_band(np.zeros((2, 9)), 0, 0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("impl", ["fused", "tiled"])
def test_gradcheck_heads(rng, module_slab_mode, impl, causal):
    q, k, v, _ = heads(rng, 2, 7, 2, 3)
    kwargs = {"impl": impl, "causal": causal}
    if impl == "tiled":
        kwargs.update(block_q=3, block_k=2)
    # gradcheck_stage copies its inputs (contiguous); the strided layout is checked above.
    assert npattn.gradcheck_stage(kernels.attention, kernels.attention_backward, [q, k, v], kwargs=kwargs)


def test_run_slabs_splits_over_the_pool_with_one_blas_thread(monkeypatch):
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(blocks, "MIN_PARALLEL_ELEMENTS", 0)
    if blocks.num_workers() < 2:
        pytest.skip("one core")
    seen = []

    def fn(s, rows):
        info = blocks._blas.info()[0] if blocks._blas else {}
        seen.append((s, rows, info.get("num_threads")))

    blocks.run_slabs(fn, [(0,), (1,), (2,), (3,)], 10)
    assert sorted(s for s, _, _ in seen) == [(0,), (1,), (2,), (3,)]
    assert all(rows is blocks.serial_rows and threads == 1 for _, rows, threads in seen)
    monkeypatch.setattr(blocks, "_blas", False)  # no way to limit BLAS: one slab after another
    seen.clear()
    blocks.run_slabs(fn, [(0,), (1,)], 10)
    assert [rows for _, rows, _ in seen] == [blocks.run_rows, blocks.run_rows]


def test_run_slabs_gives_the_other_slabs_to_a_free_worker(monkeypatch):
    """A worker held up on one slab does not hold up the rest: the others take every other slab."""
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(blocks, "MIN_PARALLEL_ELEMENTS", 0)
    if blocks.num_workers() < 2:
        pytest.skip("one core")
    slabs = [(i,) for i in range(8)]
    done, lock, rest_done, threads = [], threading.Lock(), threading.Event(), {}

    def fn(s, rows):
        threads[s] = threading.get_ident()
        if s == (0,):
            assert rest_done.wait(timeout=30), "the other slabs waited for slab 0"
        with lock:
            done.append(s)
            if len(done) == len(slabs) - 1 and (0,) not in done:
                rest_done.set()

    blocks.run_slabs(fn, slabs, 10)
    assert sorted(done) == slabs
    assert all(threads[s] != threads[(0,)] for s in slabs[1:])


# ------------------------------------------------------------------ the modules


def mha(impl, context_length=64, qkv_bias=False):
    return npattn.MultiHeadAttention(
        6, 6, context_length, 0.0, 3, qkv_bias, rng=np.random.default_rng(7), dtype=np.float64, impl=impl
    )


def run(model, x, G):
    out = model(x)
    model.zero_grad()
    dx = model.backward(G)
    return out, dx, {name: p.grad.copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("impl", ["fused", "tiled", "auto"])
@pytest.mark.parametrize("n", [37, 131])  # n < context_length; not a multiple of any block size
def test_multihead_paths_equal_the_reference(module_slab_mode, impl, n, qkv_bias, monkeypatch):
    monkeypatch.setattr(npattn.kernels.tiled, "DEFAULT_BLOCK_Q", 48)  # several blocks each way
    monkeypatch.setattr(npattn.kernels.tiled, "DEFAULT_BLOCK_K", 40)
    x = np.random.default_rng(0).standard_normal((2, n, 6))
    G = np.random.default_rng(1).standard_normal((2, n, 6))
    results = [run(mha(name, context_length=160, qkv_bias=qkv_bias), x, G) for name in ("reference", impl)]
    (out_r, dx_r, grads_r), (out, dx, grads) = results
    np.testing.assert_allclose(out, out_r, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dx, dx_r, rtol=0, atol=1e-12)
    for name in grads_r:
        np.testing.assert_allclose(grads[name], grads_r[name], rtol=0, atol=1e-12 * max(1, np.abs(grads_r[name]).max()))


@pytest.mark.parametrize("impl", ["fused", "tiled"])
def test_gradcheck_multihead(module_slab_mode, impl):
    x = np.random.default_rng(2).standard_normal((2, 11, 6))  # n = 11 < context_length = 64
    assert npattn.gradcheck(mha(impl, qkv_bias=True), x)


def test_gradcheck_non_causal_v2_on_the_fast_paths(module_slab_mode):
    x = np.random.default_rng(3).standard_normal((2, 9, 4))
    for impl in ("fused", "tiled"):
        model = npattn.SelfAttention_v2(4, 5, True, rng=np.random.default_rng(4), dtype=np.float64, impl=impl)
        assert npattn.gradcheck(model, x)


# ------------------------------------------------------------------ stage 1 as one product


def _qkv_forward(x, W_query, W_key, W_value):
    out, cache = F.project_qkv_forward(x, W_query, W_key, W_value)
    return np.stack(out), cache


def _qkv_backward(G, cache):
    return F.project_qkv_backward(G[0], G[1], G[2], cache)


def test_project_qkv_equals_three_projections_and_gradchecks(rng):
    x, Wq, Wk, Wv = rng.standard_normal((2, 5, 4)), *(rng.standard_normal((4, 3)) for _ in range(3))
    (q, k, v), _ = F.project_qkv_forward(x, Wq, Wk, Wv)
    for got, W in ((q, Wq), (k, Wk), (v, Wv)):
        np.testing.assert_allclose(got, x @ W, rtol=0, atol=1e-14)
    names = ["x", "W_query", "W_key", "W_value"]
    assert npattn.gradcheck_stage(_qkv_forward, _qkv_backward, [x, Wq, Wk, Wv], names=names)


_project_qkv_backward = F.project_qkv_backward  # the correct one, for the planted variants


def _dx_missing_value_path(d_queries, d_keys, d_values, cache):
    dx, *dWs = _project_qkv_backward(d_queries, d_keys, np.zeros_like(d_values), cache)
    _, _, _, dW_value = _project_qkv_backward(d_queries, d_keys, d_values, cache)
    return (dx, dWs[0], dWs[1], dW_value)


def _dW_query_and_key_swapped(d_queries, d_keys, d_values, cache):
    dx, dW_query, dW_key, dW_value = _project_qkv_backward(d_queries, d_keys, d_values, cache)
    return dx, dW_key, dW_query, dW_value


def _dW_from_queries_only(d_queries, d_keys, d_values, cache):
    dx, dW_query, _, _ = _project_qkv_backward(d_queries, d_keys, d_values, cache)
    return dx, dW_query, dW_query, dW_query


@pytest.mark.parametrize("bug", [_dx_missing_value_path, _dW_query_and_key_swapped, _dW_from_queries_only])
@pytest.mark.parametrize("model", ["v1", "mha"])
def test_planted_project_qkv_bugs_are_rejected(monkeypatch, bug, model):
    build = {
        "v1": lambda: npattn.SelfAttention_v1(4, 3, rng=np.random.default_rng(5), dtype=np.float64),
        "mha": lambda: mha("tiled", qkv_bias=True),
    }[model]
    x = np.random.default_rng(6).standard_normal((2, 7, 4 if model == "v1" else 6))
    assert npattn.gradcheck(build(), x)  # passes without the bug
    monkeypatch.setattr(F, "project_qkv_backward", bug)
    report = npattn.gradcheck(build(), x, raise_exception=False)
    assert not report, f"{bug.__name__} passed the gradient check"
