"""Every dtype gives the same numbers on every path: float16 runs stages 2-5 in float32, ints and
mixed dtypes their NumPy common type, and a float32 forward whose scores overflow is redone in
float64 (the reference path used to give NaN where the fast paths did not)."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn import kernels

PATHS = ["reference", "fused", "tiled"]


def _qkv(rng: np.random.Generator, dtype, n: int = 40, d: int = 8):
    return [rng.standard_normal((2, n, d)).astype(dtype) for _ in range(3)]


def test_compute_dtype():
    assert kernels.compute_dtype(np.dtype(np.float16)) == np.float32
    assert kernels.compute_dtype(np.dtype(np.float32)) == np.float32
    assert kernels.compute_dtype(np.dtype(np.float64)) == np.float64


@pytest.mark.parametrize("causal", [False, True])
def test_float16_matches_float64_on_every_path(causal):
    """The fast paths used to floor every float16 weight at exp(flush_below) = 0.06 of the row's largest."""
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, np.float16)
    g = rng.standard_normal((2, 40, 8)).astype(np.float16)
    exact, cache = kernels.attention(*(a.astype(np.float64) for a in (q, k, v)), causal=causal, impl="reference")
    exact_grads = kernels.attention_backward(g.astype(np.float64), cache)
    for impl in PATHS:
        out, cache = kernels.attention(q, k, v, causal=causal, impl=impl)
        grads = kernels.attention_backward(g, cache)
        assert out.dtype == np.float16 and all(d.dtype == np.float16 for d in grads)
        # float16 keeps ~3 digits: a few of its ulps (eps = 1e-3) of the largest value
        np.testing.assert_allclose(out, exact, rtol=0, atol=2e-3 * np.max(np.abs(exact)))
        for d, e in zip(grads, exact_grads):
            np.testing.assert_allclose(d, e, rtol=0, atol=4e-3 * np.max(np.abs(e)))


@pytest.mark.parametrize("impl", PATHS)
def test_float16_module_scores_beyond_65504(impl):
    """Scores of ~1e5 overflow float16; computed in float32 every path agrees with the reference path."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 30, 8)) * 40).astype(np.float16)
    reference = npattn.SelfAttention_v1(8, 8, rng=1, dtype=np.float16, impl="reference")(x)
    out = npattn.SelfAttention_v1(8, 8, rng=1, dtype=np.float16, impl=impl)(x)
    assert np.isfinite(reference).all()
    np.testing.assert_array_equal(out, reference)


@pytest.mark.parametrize("dtypes", [(np.int64,) * 3, (np.float32, np.float64, np.float64), (np.bool_,) * 3])
def test_ints_bools_and_mixed_dtypes_are_converted_like_numpy(dtypes):
    rng = np.random.default_rng(2)
    q, k, v = (rng.integers(0, 3, (2, 20, 4)).astype(dt) for dt in dtypes)
    exact, _ = kernels.attention(*(a.astype(np.float64) for a in (q, k, v)), impl="reference")
    for impl in PATHS:
        out, _ = kernels.attention(q, k, v, impl=impl)
        assert out.dtype == np.result_type(*(a.astype(np.float64) if a.dtype.kind != "f" else a for a in (q, k, v)))
        np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("name", ["v1", "causal", "mha"])
def test_float32_score_overflow_gives_the_same_answer_on_every_path(name):
    """Finite float32 inputs whose scores pass 3.4e38: every path redoes the forward in float64."""
    build = {
        "v1": lambda impl, dt: npattn.SelfAttention_v1(8, 4, rng=1, dtype=dt, impl=impl),
        "causal": lambda impl, dt: npattn.CausalAttention(8, 4, 64, 0.0, rng=1, dtype=dt, impl=impl),
        "mha": lambda impl, dt: npattn.MultiHeadAttention(8, 4, 64, 0.0, 2, rng=1, dtype=dt, impl=impl),
    }[name]
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 40, 8)) * 3e19).astype(np.float32)
    g = rng.standard_normal((2, 40, 4)).astype(np.float32)
    exact = build("reference", np.float64)(x.astype(np.float64))
    assert np.isfinite(exact).all()
    for impl in PATHS:
        model = build(impl, np.float32)
        out = model(x)
        dx = model.backward(g)
        assert out.dtype == np.float32 and np.isfinite(out).all(), impl
        np.testing.assert_allclose(out, exact, rtol=0, atol=1e-5 * np.max(np.abs(exact)))
        # dx was NaN on every path; at scores of 1e39 its rounding is not comparable across paths
        # (1e-5 * (1 + S) * scale, docs/errors.md), but it is finite.
        assert dx.dtype == np.float32 and np.isfinite(dx).all(), impl


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("where", ["queries", "keys", "values"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_and_inf_inputs_give_the_same_nan_pattern_on_every_path(causal, where, value):
    """The tiled path skips causal blocks: a NaN value there must still make its column NaN (0 * NaN)."""
    rng = np.random.default_rng(6)
    arrays = dict(zip(["queries", "keys", "values"], _qkv(rng, np.float64)))
    arrays[where][0, 30, 1] = value
    outs = [
        kernels.attention(*arrays.values(), causal=causal, impl=impl, **blocks)[0]
        for impl, blocks in [("reference", {}), ("fused", {}), ("tiled", {"block_q": 8, "block_k": 8})]
    ]
    assert not np.isfinite(outs[0][0]).all() and np.isfinite(outs[0][1]).all()  # the other sequence is untouched
    for out in outs[1:]:
        np.testing.assert_array_equal(np.isnan(out), np.isnan(outs[0]))
        np.testing.assert_array_equal(np.isinf(out), np.isinf(outs[0]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("causal", [False, True])
def test_a_non_finite_token_makes_the_same_entries_non_finite_on_every_path(causal, value):
    x = np.random.default_rng(3).standard_normal((2, 30, 4))
    x[0, 20, 1] = value
    outs = []
    for impl in PATHS:
        if causal:
            model: npattn.Module = npattn.MultiHeadAttention(4, 4, 64, 0.0, 2, rng=1, dtype=np.float64, impl=impl)
        else:
            model = npattn.SelfAttention_v1(4, 4, rng=1, dtype=np.float64, impl=impl)
        outs.append(model(x))
    assert not np.isfinite(outs[0][0]).any() and np.isfinite(outs[0][1]).all()
    for out in outs[1:]:
        np.testing.assert_array_equal(np.isfinite(out), np.isfinite(outs[0]))
        np.testing.assert_allclose(out[1], outs[0][1], rtol=1e-12, atol=1e-12)
