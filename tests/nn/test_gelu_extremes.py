"""GELU at the edge of the dtype's range: finite where the book's GELU is, forward and backward,
and no overflow warnings from the intermediate x^3."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_gelu_of_huge_inputs_is_finite(dtype: type) -> None:
    big = np.finfo(dtype).max
    x = np.array([big, -big, big / 3, -big / 3, 900.0, -900.0, 30.0, -30.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the x^3 overflow is expected and handled
        out, cache = F.gelu_forward(x)
        (dx,) = F.gelu_backward(np.ones_like(x), cache)
    # the book's 0.5 * x * (1 + tanh(...)): x for large positive x, -0 for large negative x
    np.testing.assert_array_equal(out, np.where(x > 0, x, dtype(0)))
    assert out.dtype == dtype
    # the true derivative: 1 for large positive x, 0 for large negative x
    np.testing.assert_array_equal(dx, np.where(x > 0, dtype(1), dtype(0)))


def test_gelu_module_float32_3e38_matches_the_books_value() -> None:
    x = np.array([[np.float32(3e38), np.float32(-3e38), np.float32(1.0)]])
    g = npattn.GELU()
    out = g(x)
    assert out[0, 0] == np.float32(3e38) and out[0, 1] == 0.0
    dx = g.backward(np.ones_like(x))
    assert np.isfinite(dx).all() and dx[0, 0] == 1.0 and dx[0, 1] == 0.0


def test_gelu_matches_torch_on_huge_inputs() -> None:
    torch = pytest.importorskip("torch")
    x = np.array([3e38, -3e38, 1e30, 1e13, -1e13, 2.5, -2.5], np.float32)
    t = torch.from_numpy(x)
    c = torch.sqrt(torch.tensor(2.0 / torch.pi))
    expected = (0.5 * t * (1 + torch.tanh(c * (t + 0.044715 * torch.pow(t, 3))))).numpy()
    np.testing.assert_allclose(F.gelu_forward(x)[0], expected, rtol=1e-5, atol=1e-6)
