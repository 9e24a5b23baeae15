"""The fast paths of stages 2-5 (npattn.kernels.fused, npattn.kernels.tiled) and the dispatcher (npattn.kernels):
equal to the reference path (float64: fused 1e-12, tiled 1e-10) over many shapes and block sizes,
causal and not, batched and (b, h, n, d); gradient-checked; planted bugs in their backward rejected.
"""

import numpy as np
import pytest

import npattn
from npattn import kernels
from npattn.kernels import blocks, dispatch, fused, tiled
from npattn.nn import functional as F

CASES = [  # (leading axes, n, m, k, kv)
    ((), 1, 1, 1, 1),
    ((), 6, 6, 2, 2),
    ((), 7, 7, 3, 5),
    ((), 9, 13, 3, 4),
    ((), 13, 9, 4, 3),
    ((3,), 17, 17, 5, 4),
    ((2, 3), 11, 11, 4, 4),
    ((2, 2), 33, 33, 8, 6),
]
BLOCKS = [(1, 1), (2, 3), (4, 4), (5, 2), (8, 16), (512, 512)]


def qkv(rng, lead, n, m, k, kv, spread=2.0):
    return (
        rng.standard_normal((*lead, n, k)) * spread,
        rng.standard_normal((*lead, m, k)) * spread,
        rng.standard_normal((*lead, m, kv)),
    )


def reference(q, k, v, G, causal):
    mask = F.causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    out, cache = F.attention_forward(q, k, v, mask=mask)
    return out, F.attention_backward(G, cache)


def worst(a, b):
    """max |a - b|, NaN counted as infinitely wrong."""
    d = np.abs(a - b)
    return float(np.max(np.where(np.isnan(d), np.inf, d), initial=0.0))


def max_error(q, k, v, causal, forward, backward, rng, **kwargs):
    G = rng.standard_normal((*q.shape[:-1], v.shape[-1]))
    out_ref, grads_ref = reference(q, k, v, G, causal)
    out, cache = forward(q, k, v, causal=causal, **kwargs)
    grads = backward(G, cache)
    assert out.shape == out_ref.shape
    for g, g_ref in zip(grads, grads_ref):
        assert g.shape == g_ref.shape
    return max(
        np.max(np.abs(out - out_ref), initial=0.0),
        *(np.max(np.abs(g - r), initial=0.0) for g, r in zip(grads, grads_ref)),
    )


@pytest.fixture(params=[False, True], ids=["serial", "threads"])
def threads(request, monkeypatch):
    """Run each case once in the calling thread and once split over the pool (even tiny blocks)."""
    monkeypatch.setattr(blocks, "MIN_PARALLEL_ELEMENTS", 0 if request.param else 1 << 60)
    return request.param


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lead,n,m,k,kv", CASES)
def test_fused_equals_reference(rng, threads, lead, n, m, k, kv, causal):
    q, key, v = qkv(rng, lead, n, m, k, kv)
    assert max_error(q, key, v, causal, fused.fused_forward, fused.fused_backward, rng) <= 1e-12


@pytest.mark.parametrize("block_q,block_k", BLOCKS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lead,n,m,k,kv", CASES)
def test_tiled_equals_reference(rng, threads, lead, n, m, k, kv, causal, block_q, block_k):
    q, key, v = qkv(rng, lead, n, m, k, kv)
    err = max_error(q, key, v, causal, tiled.tiled_forward, tiled.tiled_backward, rng, block_q=block_q, block_k=block_k)
    assert err <= 1e-10


def test_larger_problem_both_paths(rng):
    """n = 300 with blocks that do not divide it; float32 within float32 rounding."""
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-5)):
        q, k, v = (a.astype(dtype) for a in qkv(rng, (2,), 300, 300, 16, 8, spread=1.0))
        for causal in (False, True):
            for forward, backward, kw in (
                (fused.fused_forward, fused.fused_backward, {}),
                (tiled.tiled_forward, tiled.tiled_backward, {"block_q": 128, "block_k": 96}),
            ):
                out, cache = forward(q, k, v, causal=causal, **kw)
                assert out.dtype == dtype
                assert all(g.dtype == dtype for g in backward(np.ones_like(out), cache))
                G = rng.standard_normal(out.shape).astype(dtype)
                out_ref, grads_ref = reference(q, k, v, G, causal)
                grads = backward(G, cache)
                scale = max(1.0, float(np.max(np.abs(out_ref))))
                assert np.max(np.abs(out - out_ref)) <= tol * scale
                for g, r in zip(grads, grads_ref):
                    assert np.max(np.abs(g - r)) <= tol * max(1.0, float(np.max(np.abs(r))))


def test_causal_rows_see_only_the_past(rng):
    """Changing a later key or value never changes an earlier output row, on both fast paths."""
    q, k, v = qkv(rng, (), 10, 10, 3, 2)
    k2, v2 = k.copy(), v.copy()
    k2[6:] += 5.0
    v2[6:] -= 3.0
    for forward, kw in ((fused.fused_forward, {}), (tiled.tiled_forward, {"block_q": 3, "block_k": 4})):
        a, _ = forward(q, k, v, causal=True, **kw)
        b, _ = forward(q, k2, v2, causal=True, **kw)
        np.testing.assert_array_equal(a[:6], b[:6])
        assert not np.allclose(a[6:], b[6:])


def test_large_scores_neither_overflow_nor_underflow():
    """Scores in the thousands (a long query almost orthogonal to every key)."""
    q = np.array([[1000.0, 0.0], [1.0, 1.0], [0.0, 1000.0]])
    k = np.array([[0.0, 1.0], [0.001, 5.0], [2.0, 0.0]])
    v = np.random.default_rng(0).standard_normal((3, 2))
    G = np.random.default_rng(1).standard_normal((3, 2))
    for causal in (False, True):
        out_ref, grads_ref = reference(q, k, v, G, causal)
        out, cache = fused.fused_forward(q, k, v, causal=causal)
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(out, out_ref, rtol=1e-12, atol=1e-12)
        for g, r in zip(fused.fused_backward(G, cache), grads_ref):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12 * np.max(np.abs(r)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saturated_softmax_has_no_subnormal_weights(rng, dtype):
    """Scores spread over thousands (nearly one-hot rows): no weight is subnormal, and the results
    still equal the reference's."""
    q, k, v = (a.astype(dtype) for a in qkv(rng, (), 64, 64, 8, 4, spread=30.0))
    G = rng.standard_normal((64, 4)).astype(dtype)
    out_ref, grads_ref = reference(q, k, v, G, False)
    tiny = np.finfo(dtype).tiny
    assert np.any((out_ref != 0) & (np.abs(out_ref) < 1)), "the test needs saturated rows"
    _, cache = fused.fused_forward(q, k, v)
    E = cache[3]
    assert not np.any((E > 0) & (E < tiny)) and np.mean(E <= np.exp(blocks.flush_below(dtype))) > 0.5
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for forward, backward in ((fused.fused_forward, fused.fused_backward), (tiled.tiled_forward, tiled.tiled_backward)):
        out, cache = forward(q, k, v, causal=False)
        np.testing.assert_allclose(out, out_ref, rtol=0, atol=tol * np.max(np.abs(out_ref)))
        for g, r in zip(backward(G, cache), grads_ref):
            np.testing.assert_allclose(g, r, rtol=0, atol=tol * max(1.0, float(np.max(np.abs(r)))))


# ------------------------------------------------------------------ gradient checks


@pytest.mark.parametrize("impl", ["fused", "tiled"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lead,n,m,k,kv", [((), 6, 6, 2, 2), ((2,), 5, 7, 3, 2), ((2, 2), 9, 9, 3, 3)])
def test_gradcheck_stage(rng, impl, causal, lead, n, m, k, kv):
    q, key, v = qkv(rng, lead, n, m, k, kv, spread=1.0)
    kwargs = {"impl": impl, "causal": causal}
    if impl == "tiled":
        kwargs.update(block_q=4, block_k=3)
    npattn.gradcheck_stage(
        kernels.attention, kernels.attention_backward, [q, key, v], kwargs=kwargs, names=["queries", "keys", "values"]
    )


@pytest.mark.parametrize("impl", kernels.IMPLS)
@pytest.mark.parametrize("batch,n", [(None, 6), (3, 20)])
def test_gradcheck_module(impl, batch, n):
    model = npattn.SelfAttention_v1(4, 3, rng=np.random.default_rng(0), dtype=np.float64, impl=impl)
    shape = (n, 4) if batch is None else (batch, n, 4)
    report = npattn.gradcheck(model, np.random.default_rng(1).standard_normal(shape))
    assert report and all(c.margin >= 100 for c in report.checks), str(report)


# ------------------------------------------------------------------ planted bugs


_online_softmax_rows = tiled._online_softmax_rows


def _wrong_rescale(S, mx, alpha, r0, r1):  # forgets to rescale what was summed before
    _online_softmax_rows(S, mx, alpha, r0, r1)
    alpha[:, r0:r1] = 1.0


def _inverted_rescale(S, mx, alpha, r0, r1):  # exp(mx_new - mx_old) instead of exp(mx_old - mx_new)
    _online_softmax_rows(S, mx, alpha, r0, r1)
    a = alpha[:, r0:r1]
    a[a > 0] = 1.0 / a[a > 0]


def _band_with_the_diagonal(block, row0, col0):  # masks each query's own key too
    band, above = blocks.causal_band(block, row0, col0)
    return band, np.triu(np.ones(above.shape, dtype=bool))


def _short_key_end(e, m, causal):  # the last query of each block loses its own key
    return min(m, e - 1) if causal else m


# name -> (module, attribute, broken replacement, whether the bug is in the backward)
PLANTED = {
    "tiled: missing D term": (tiled, "row_dot", lambda a, b: np.zeros(a.shape[:2]), True),
    "tiled: D from G * G": (tiled, "row_dot", lambda a, b: np.einsum("bij,bij->bi", a, a), True),
    "tiled: backward weights not exponentiated": (tiled, "_exp_rows", lambda S, r0, r1: None, True),
    "tiled: dS without the weights": (tiled, "_multiply_rows", lambda dS, P, r0, r1: None, True),
    "tiled: running sum not rescaled": (tiled, "_online_softmax_rows", _wrong_rescale, False),
    "tiled: running sum rescaled the wrong way": (tiled, "_online_softmax_rows", _inverted_rescale, False),
    "tiled: diagonal blocks not masked": (tiled, "_crosses", lambda a, k0, k1, causal: False, False),
    "tiled: the diagonal itself masked": (tiled, "causal_band", _band_with_the_diagonal, False),
    "fused: missing D term": (fused, "row_dot", lambda a, b: np.zeros(a.shape[:2]), True),
    "fused: dS without the weights": (fused, "_multiply_rows", lambda dS, E, r0, r1: None, True),
    "fused: diagonal not masked": (fused, "causal_fill", lambda block, row0, col0, value: None, False),
    "tiled: causal blocks stop before the diagonal key": (tiled, "key_end", _short_key_end, False),
    "fused: causal row blocks stop before the diagonal key": (fused, "key_end", _short_key_end, False),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bug_rejected(rng, monkeypatch, bug):
    """Every bug gives a wrong answer against the reference; a bug in a backward also fails the
    gradient check (a forward bug changes the function itself, so only the reference sees it)."""
    module, attr, broken, in_backward = PLANTED[bug]
    q, k, v = qkv(rng, (2,), 9, 9, 3, 3, spread=1.0)
    kwargs = {"impl": "fused", "causal": True} if module is not tiled else {
        "impl": "tiled", "causal": True, "block_q": 4, "block_k": 3}  # fmt: skip
    args = (kernels.attention, kernels.attention_backward, [q, k, v])
    assert npattn.gradcheck_stage(*args, kwargs=kwargs)  # passes without the bug
    monkeypatch.setattr(module, attr, broken)
    G = rng.standard_normal((2, 9, 3))
    with np.errstate(all="ignore"):  # some bugs produce inf or NaN
        out, cache = kernels.attention(q, k, v, **kwargs)
        grads = kernels.attention_backward(G, cache)
    out_ref, grads_ref = reference(q, k, v, G, True)
    error = max(worst(out, out_ref), *(worst(g, r) for g, r in zip(grads, grads_ref)))
    assert error > 1e-3, f"{bug}: the result still equals the reference"
    if in_backward:
        with np.errstate(all="ignore"):
            report = npattn.gradcheck_stage(*args, kwargs=kwargs, raise_exception=False)
        assert not report, f"{bug} passed the gradient check"


# ------------------------------------------------------------------ dispatcher and module wiring


def test_choose_impl_rules(monkeypatch):
    small = np.zeros((6, 2))
    mid = np.zeros((256, 8))
    assert kernels.choose_impl("auto", small, small, small) == "reference"
    assert kernels.choose_impl("auto", mid, mid, mid) == "fused"
    assert kernels.choose_impl("auto", mid[None], mid, mid) == "reference"  # broadcasting
    for impl in ("reference", "fused", "tiled"):
        assert kernels.choose_impl(impl, small, small, small) == impl
        assert kernels.choose_impl(impl, mid, mid, mid, dropout=True) == "reference"
        assert kernels.choose_impl(impl, mid, mid, mid, record=lambda name, a: None) == "reference"
    assert kernels.choose_impl("auto", mid[:192], mid[:192], mid[:192]) == "reference"
    heads = np.zeros((2, 3, 256, 8))  # several slabs: tiled when they can be split over the cores
    monkeypatch.setattr(blocks, "_blas", False)
    assert kernels.choose_impl("auto", heads, heads, heads) == "fused"
    monkeypatch.setattr(blocks, "_blas", True)
    monkeypatch.setattr(blocks, "num_workers", lambda: 2)
    assert kernels.choose_impl("auto", heads, heads, heads) == "tiled"
    monkeypatch.setattr(dispatch, "AUTO_TILED_BYTES", 256 * 256 * 8 - 1)
    assert kernels.choose_impl("auto", mid, mid, mid) == "tiled"
    assert (
        kernels.choose_impl("auto", mid.astype(np.float32), mid.astype(np.float32), mid.astype(np.float32)) == "fused"
    )


def test_dispatcher_errors(rng):
    q, k, v = qkv(rng, (2,), 5, 5, 3, 3)
    with pytest.raises(npattn.ConfigError, match="impl must be one of"):
        kernels.attention(q, k, v, impl="flash")
    with pytest.raises(npattn.ConfigError, match="block_q"):
        kernels.attention(q, k, v, impl="tiled", block_q=0)
    with pytest.raises(npattn.ShapeError, match="leading"):
        kernels.attention(q, k[0], v[0], impl="fused")
    with pytest.raises(npattn.ShapeError, match="last dimensions"):
        kernels.attention(q, k[..., :2], v, impl="tiled")
    with pytest.raises(npattn.ShapeError, match="rows"):
        kernels.attention(q, k, v[:, :4], impl="fused")
    with pytest.raises(npattn.ShapeError, match="no keys"):  # the path itself; the dispatcher uses the reference
        kernels.tiled.tiled_forward(q, k[:, :0], v[:, :0])
    empty, _ = kernels.attention(q, k[:, :0], v[:, :0], impl="tiled")
    assert empty.shape == (*q.shape[:-1], v.shape[-1]) and not empty.any()
    # The paths themselves take one float32 or float64 dtype; the dispatcher converts (see the numerics tests).
    with pytest.raises(npattn.DTypeError, match="dtypes differ"):
        kernels.fused.fused_forward(q, k.astype(np.float32), v)
    with pytest.raises(npattn.DTypeError, match="float32 or float64"):
        kernels.tiled.tiled_forward(q.astype(int), k.astype(int), v.astype(int))
    with pytest.raises(npattn.DTypeError, match="float32 or float64"):
        kernels.fused.fused_forward(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))
    with pytest.raises(npattn.ConfigError, match="impl"):
        npattn.SelfAttention_v1(3, 2, impl="fast")


def test_explicit_mask_falls_back_to_the_reference(rng):
    q, k, v = qkv(rng, (2,), 6, 6, 3, 3)
    mask = rng.random((6, 6)) < 0.3
    mask[:, 0] = False
    out, cache = kernels.attention(q, k, v, impl="fused", mask=mask)
    assert cache[0] == "reference"
    np.testing.assert_array_equal(out, F.attention_forward(q, k, v, mask=mask)[0])
    causal, _ = kernels.attention(q, k, v, impl="fused", mask=F.causal_mask(6))
    np.testing.assert_allclose(causal, kernels.attention(q, k, v, impl="fused", causal=True)[0], atol=1e-12)
    with pytest.raises(npattn.ConfigError, match="not both"):
        kernels.attention(q, k, v, causal=True, mask=mask)


def test_dropout_falls_back_to_the_reference(rng):
    q, k, v = qkv(rng, (2,), 6, 6, 3, 3)
    keep = rng.random((2, 6, 6)) >= 0.5
    out, cache = kernels.attention(q, k, v, impl="tiled", causal=True, dropout_keep=keep, dropout_p=0.5)
    assert cache[0] == "reference"
    expected, _ = F.attention_forward(q, k, v, mask=F.causal_mask(6), dropout_keep=keep, dropout_p=0.5)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("impl", ["fused", "tiled"])
def test_module_impls_agree_and_tracing_uses_the_reference(impl):
    x = np.random.default_rng(2).standard_normal((2, 40, 5))
    ref = npattn.SelfAttention_v1(5, 4, rng=3, dtype=np.float64, impl="reference")
    fast = npattn.SelfAttention_v1(5, 4, rng=3, dtype=np.float64, impl=impl)
    assert f"impl='{impl}'" in repr(fast)
    G = np.random.default_rng(4).standard_normal((2, 40, 4))
    np.testing.assert_allclose(fast(x), ref(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.backward(G), ref.backward(G), rtol=0, atol=1e-12)
    for name, p in fast.named_parameters():
        np.testing.assert_allclose(p.grad, dict(ref.named_parameters())[name].grad, rtol=0, atol=1e-11)
    stages = []
    fast._recorder = lambda name, a: stages.append(name)
    fast(x)
    assert "attn_weights" in stages  # the reference path ran, stage by stage
    assert fast._cache[1][0] == "reference"


@pytest.mark.parametrize("impl", ["reference", "fused"])
def test_block_sizes_on_a_path_without_blocks_are_refused(impl):
    q = np.ones((1, 4, 2))
    with pytest.raises(npattn.ConfigError, match=f"impl='{impl}' has no blocks"):
        kernels.attention(q, q, q, impl=impl, block_q=2, block_k=2)
