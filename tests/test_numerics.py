"""Numerics at the extremes: scaled scores up to 1e4, NaN and inf inputs, float32 against float64.

The documented contract (docs/errors.md, "Numerics"):
- softmax stays finite and within a few ulps of a float64 log-sum-exp reference for scaled
  scores of any magnitude up to 1e4 (and beyond), in float32 and float64; gradients stay finite;
- NaN or inf in an input propagates (no error, like NumPy and PyTorch): every context row of
  that sequence becomes NaN, other sequences of the batch are untouched;
- float32 agrees with float64 to within F32_TOL * (1 + S) * scale, where S is the largest
  |scaled score| and scale is max|values| for outputs or max|gradient| for gradients.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES, AttentionCase, largest_scaled_score, record_stages, softmax_reference

import npattn
from npattn.nn import functional as F

F32_TOL = 1e-5  # float32 vs float64, relative to (1 + S) * scale; the worst measured is 1e-6 (docs/errors.md)
F64_TOL = 1e-13  # float64 vs the float64 log-sum-exp reference, same normalisation
MAGNITUDES = [1.0, 1e2, 1e3, 1e4]
DTYPES = [np.float32, np.float64]


def _rows(pattern: str, magnitude: float, dtype: type, rng: np.random.Generator) -> np.ndarray:
    """(4, 8) scaled scores of the given pattern and magnitude."""
    M = magnitude
    z = rng.uniform(-M, M, (4, 8))
    if pattern == "one dominant key":
        z = np.full((4, 8), -M)
        z[np.arange(4), rng.integers(0, 8, 4)] = M
    elif pattern == "tie at the maximum":
        z[:, 2] = z[:, 5] = M
    elif pattern == "all equal":
        z[...] = M
    elif pattern == "gaps of a few ulps":
        z = M - np.arange(8) * np.spacing(dtype(M)) * rng.integers(1, 4, (4, 1))
    elif pattern == "alternating +M and -M":
        z = M * np.where(np.arange(8) % 2, 1.0, -1.0) * np.ones((4, 1))
    elif pattern == "all at -M":
        z[...] = -M
    return z.astype(dtype)


PATTERNS = [
    "uniform in [-M, M]",
    "one dominant key",
    "tie at the maximum",
    "all equal",
    "gaps of a few ulps",
    "alternating +M and -M",
    "all at -M",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("magnitude", MAGNITUDES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_softmax_stage_at_extreme_scores(dtype, magnitude, pattern):
    rng = np.random.default_rng(0)
    z = _rows(pattern, magnitude, dtype, rng)
    eps = np.finfo(dtype).eps
    weights, cache = F.softmax_forward(z, 1.0)
    reference = softmax_reference(z)  # from the same (rounded) scores: isolates the softmax
    assert weights.dtype == dtype and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights, reference, rtol=0, atol=4 * eps)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=8 * eps)
    d_weights = rng.standard_normal(z.shape).astype(dtype)
    (d_scores,) = F.softmax_backward(d_weights, cache)
    d_ref = reference * (d_weights - np.sum(d_weights * reference, axis=-1, keepdims=True))
    assert np.all(np.isfinite(d_scores))
    np.testing.assert_allclose(d_scores, d_ref, rtol=0, atol=16 * eps * np.max(np.abs(d_weights)))


def _scaled_to(case: AttentionCase, target: float, seed: int = 0) -> tuple[np.ndarray, float]:
    """An input (2, 6, 4) whose largest |scaled score| is ``target`` (scores grow as |x|^2)."""
    x = np.random.default_rng(seed).standard_normal((2, 6, 4))

    def scaled_score(x: np.ndarray) -> float:
        model = case.build(4, 3, seed, np.float64)
        seen = record_stages(model)
        model(x)
        return largest_scaled_score(model, seen)

    x *= np.sqrt(target / scaled_score(x))
    return x, scaled_score(x)


@pytest.mark.parametrize("target", MAGNITUDES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if c.reference], ids=str)
def test_module_at_extreme_scores_matches_log_sum_exp_reference(case, dtype, target):
    x, S = _scaled_to(case, target)
    assert S == pytest.approx(target, rel=1e-6)
    model = case.build(4, 3, 0, dtype)
    seen = record_stages(model)
    out = model(x)
    assert out.dtype == dtype and np.all(np.isfinite(out))
    for weights in seen["attn_weights"]:
        assert np.all((weights >= 0) & (weights <= 1))
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=8 * np.finfo(dtype).eps)
    reference = case.reference(model, x.astype(dtype))
    scale = max(float(np.max(np.abs(v))) for v in seen["values"])
    tol = (F32_TOL if dtype == np.float32 else F64_TOL) * (1 + S) * scale
    np.testing.assert_allclose(out, reference, rtol=0, atol=tol)
    dx = model.backward(np.random.default_rng(1).standard_normal(out.shape))
    assert np.all(np.isfinite(dx))
    assert all(np.all(np.isfinite(p.grad)) for p in model.parameters())


@pytest.mark.parametrize("target", [3.0, 30.0, 300.0])
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_gradients_stay_correct_as_the_softmax_saturates(case, target):
    x, _ = _scaled_to(case, target, seed=2)
    npattn.gradcheck(case.build(4, 3, 2, np.float64).eval(), x[:1, :4])


BAD_VALUES = [np.nan, np.inf, -np.inf]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("bad", BAD_VALUES, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if not c.causal], ids=str)
def test_non_finite_input_propagates_to_its_own_sequence_only(case, dtype, bad):
    model = case.build(3, 2, 123, dtype)
    x = np.repeat(npattn.book_inputs()[None], 2, axis=0)
    x[0, 2, 1] = bad
    clean = model(x[1:])[0]
    out = model(x)  # no error: NaN propagates as in NumPy and PyTorch
    assert np.all(np.isnan(out[0])), "every token attends to the bad one"
    np.testing.assert_array_equal(out[1], clean)
    dx = model.backward(np.ones_like(out))
    assert np.all(np.isnan(dx[0])) and np.all(np.isfinite(dx[1]))
    assert all(np.any(np.isnan(p.grad)) for p in model.parameters()), "parameter gradients sum over the batch"


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_nan_in_the_upstream_gradient_propagates(case):
    model = case.build(3, 2, 123, np.float64)
    out = model(npattn.book_inputs()[None])
    g = np.ones_like(out)
    g[0, 1, 0] = np.nan
    assert np.all(np.isnan(model.backward(g)))


SIZES = {"n": (1, 2, 8, 64, 128), "d_in": (1, 3, 16, 64), "d_out": (1, 2, 16, 64), "batch": ((), (3,))}
GRID = list(itertools.product(*SIZES.values()))


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
@pytest.mark.parametrize("n,d_in,d_out,batch", GRID, ids=[f"n{n}-d_in{i}-d_out{o}-batch{b}" for n, i, o, b in GRID])
def test_float32_agrees_with_float64(case, n, d_in, d_out, batch):
    if case.max_tokens is not None and n > case.max_tokens:
        pytest.skip(f"{case} takes at most {case.max_tokens} tokens")
    rng = np.random.default_rng(n * 1000 + d_in * 10 + d_out)
    x = rng.standard_normal((*batch, n, d_in)) if case.accepts_2d or batch else rng.standard_normal((1, n, d_in))
    m32, m64 = case.build(d_in, d_out, 7, np.float32), case.build(d_in, d_out, 7, np.float64)
    seen = record_stages(m64)
    out32, out64 = m32(x), m64(x)
    g = rng.standard_normal(out64.shape)
    dx32, dx64 = m32.backward(g), m64.backward(g)
    S = largest_scaled_score(m64, seen)
    bound = F32_TOL * (1 + S)
    values_scale = max(float(np.max(np.abs(v))) for v in seen["values"])
    assert np.max(np.abs(out32 - out64)) <= bound * values_scale
    assert np.max(np.abs(dx32 - dx64)) <= bound * np.max(np.abs(dx64))
    grad_scale = max(float(np.max(np.abs(p.grad))) for p in m64.parameters())
    for p32, p64 in zip(m32.parameters(), m64.parameters()):
        assert np.max(np.abs(p32.grad - p64.grad)) <= bound * grad_scale


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_extremes_and_nan_match_pytorch():
    torch = pytest.importorskip("torch")
    case = ATTENTION_CASES[0]
    x, _ = _scaled_to(case, 1e4)
    x[1, 3, 0] = np.nan
    model = npattn.SelfAttention_v1(4, 3, rng=0)
    out = model(x)
    W_query, W_key, W_value = (torch.from_numpy(p.data) for p in model.parameters())
    xt = torch.from_numpy(x.astype(np.float32))
    queries, keys, values = xt @ W_query, xt @ W_key, xt @ W_value
    expected = torch.softmax(queries @ keys.mT / keys.shape[-1] ** 0.5, dim=-1) @ values
    np.testing.assert_array_equal(np.isnan(out), torch.isnan(expected).numpy())
    scale = float(values[0].abs().max())
    np.testing.assert_allclose(out[0], expected[0].numpy(), rtol=0, atol=F32_TOL * (1 + 1e4) * scale)
