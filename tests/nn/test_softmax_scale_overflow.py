"""softmax_forward with a scale that pushes finite scores past the dtype's largest value gives the
float64 answer rounded (it gave NaN), and float16 is computed in float32; backward likewise."""

import numpy as np
import pytest

from npattn.nn import functional as F


def _f64(scores, scale, g):
    """Forward and backward in float64 from the same values."""
    z = scores.astype(np.float64) * scale
    a = np.exp(z - z.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    g = g.astype(np.float64)
    return a, scale * a * (g - (g * a).sum(-1, keepdims=True))


CASES = [
    (np.array([[60000.0, 0.0, -60000.0], [1.0, 2.0, 3.0]], np.float16), 4.0),
    (np.array([[3e38, 0.0, -3e38], [1.0, 2.0, 3.0]], np.float32), 4.0),
    (np.array([[-3e38, 3e38, -np.inf], [0.5, -2.0, 1.0]], np.float32), 2.0),  # a masked score too
    (np.array([[60000.0, 59000.0, 0.0]], np.float16), 1e-3),  # fits: float16 values in float32
]


@pytest.mark.parametrize("scores, scale", CASES)
def test_overflowing_product_gives_the_float64_answer_rounded(scores, scale):
    g = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])[: len(scores)].astype(scores.dtype)
    weights, cache = F.softmax_forward(scores, scale)
    (d_scores,) = F.softmax_backward(g, cache)
    want_w, want_d = _f64(scores, scale, g)
    eps = float(np.finfo(scores.dtype).eps)
    assert weights.dtype == d_scores.dtype == scores.dtype
    assert np.all(np.isfinite(weights)) and np.all(np.isfinite(d_scores))
    np.testing.assert_allclose(weights, want_w, rtol=0, atol=eps)
    np.testing.assert_allclose(d_scores, want_d, rtol=0, atol=2 * eps * scale * np.abs(g).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ordinary_scores_unchanged_bit_for_bit(dtype):
    rng = np.random.default_rng(0)
    scores = (rng.standard_normal((2, 5, 5)) * 10).astype(dtype)
    scores[:, 0, 3:] = -np.inf
    weights, cache = F.softmax_forward(scores, 0.125)
    assert np.array_equal(weights, F.softmax(scores * 0.125))
    g = rng.standard_normal(scores.shape).astype(dtype)
    want = 0.125 * weights * (g - (g * weights).sum(-1, keepdims=True))
    assert np.array_equal(F.softmax_backward(g, cache)[0], want)


def test_float16_rows_are_float16_rounding_of_float64():
    rng = np.random.default_rng(1)
    scores = (rng.standard_normal((4, 64)) * 8).astype(np.float16)
    g = rng.standard_normal((4, 64)).astype(np.float16)
    weights, cache = F.softmax_forward(scores, 0.5)
    want_w, want_d = _f64(scores, 0.5, g)
    eps = float(np.finfo(np.float16).eps)
    np.testing.assert_allclose(weights, want_w, rtol=eps, atol=1e-7)
    (d_scores,) = F.softmax_backward(g, cache)
    np.testing.assert_allclose(d_scores, want_d, rtol=0, atol=2 * eps * np.abs(want_d).max())
