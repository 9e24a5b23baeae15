"""Layer norm of finite rows whose squares overflow (1e160 in float64, 1e30 in float32) gives the
row's true output and gradients, those of the row scaled down exactly by a power of two (it gave
all zeros, silently: the variance was inf); rows of ordinary size beside them are bit for bit as
before."""

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F

ROW = np.array([1.0, -1.0, 0.3, 0.0])


@pytest.mark.parametrize(("dtype", "size"), [(np.float64, 1e160), (np.float64, 1e300), (np.float32, 1e30)])
def test_huge_rows_are_normalised_as_their_scaled_down_copies(dtype, size):
    x = np.stack([ROW * size, np.array([1e-3, 2.0, -0.5, 0.25])]).astype(dtype)
    s = 2.0 ** np.frexp(dtype(size))[1]  # the power of two the huge row is divided by
    small = np.stack([x[0] / dtype(s), x[1]]).astype(dtype)
    scale, shift = np.linspace(0.5, 2, 4).astype(dtype), np.linspace(-1, 1, 4).astype(dtype)
    g = np.random.default_rng(0).standard_normal(x.shape).astype(dtype)
    out, cache = F.layer_norm_forward(x, scale, shift, 1e-30)
    ref, ref_cache = F.layer_norm_forward(small, scale, shift, 1e-30)
    assert np.all(np.isfinite(out)) and np.abs(out[0]).max() > 1
    np.testing.assert_allclose(out, ref, rtol=1e-6 if dtype == np.float32 else 1e-14)
    dx, dscale, dshift = F.layer_norm_backward(g, cache)
    rdx, rdscale, rdshift = F.layer_norm_backward(g, ref_cache)
    np.testing.assert_allclose(dx[0] * dtype(s), rdx[0], rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.array_equal(dx[1], rdx[1]) and np.array_equal(out[1], ref[1])  # the ordinary row: as before
    np.testing.assert_allclose(dscale, rdscale, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.array_equal(dshift, rdshift)


def test_the_module_gives_the_true_values():
    out = npattn.LayerNorm(4, dtype=np.float64)(np.array([[1e160, -1e160, 3e159, 0.0]]))
    np.testing.assert_allclose(out, [[1.2866160, -1.4952565, 0.3129607, -0.1043202]], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_row_is_judged_on_its_own(dtype):
    huge = {np.float32: 1e30, np.float64: 1e160}[dtype]
    rows = np.array([[1e19, 1e19, 1e19, 1e19], [1.0, 2.0, -3.0, 0.5], [huge, -huge, 0.3 * huge, 0.0],
                     [np.nan, 1.0, 2.0, 3.0]], dtype)  # fmt: skip
    scale, shift = np.ones(4, dtype), np.full(4, 0.5, dtype)
    out, (_, std, _) = F.layer_norm_forward(rows, scale, shift, 1e-5)
    for i in (0, 1):  # ordinary rows: exactly what they give alone
        alone, (_, s1, _) = F.layer_norm_forward(rows[i : i + 1], scale, shift, 1e-5)
        assert np.array_equal(out[i], alone[0]) and np.array_equal(std[i], s1[0])
    np.testing.assert_allclose(out[2], np.array([1.2866160, -1.4952565, 0.3129607, -0.1043202]) + 0.5, rtol=1e-5)
    assert np.all(np.isnan(out[3]))


@pytest.mark.parametrize(("dtype", "value"), [(np.float32, 1e37), (np.float64, 1.5e308), (np.float64, 1e200)])
def test_a_constant_huge_row_is_its_shift(dtype, value):
    x = np.full((2, 200), value, dtype)
    shift = np.linspace(-1, 1, 200).astype(dtype)
    out, (norm_x, std, _) = F.layer_norm_forward(x, np.ones(200, dtype), shift, 1e-5)
    assert np.array_equal(out, np.broadcast_to(shift, out.shape)) and np.allclose(std, np.sqrt(1e-5))
    dx, _, _ = F.layer_norm_backward(np.ones_like(x), (norm_x, std, np.ones(200, dtype)))
    assert np.all(np.isfinite(dx))
