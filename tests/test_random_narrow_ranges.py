"""``TorchGenerator.uniform`` on ranges a few ulps wide: ``u * (high - low) + low`` can round up to
``high``, and torch gives ``low`` for such a sample (every sample in [low, high)); npattn returned
``high`` (60 of 100 such float32 ranges differed from torch). Checked against committed draws, and
against torch live when it is installed."""

import numpy as np
import pytest

from npattn.random import TorchGenerator

# torch.manual_seed(seed); torch.empty(12, dtype=float32).uniform_(1.0, nextafter(1.0, 2.0)) gives
# 1.0 twelve times (u * 2**-23 + 1 rounds up to the upper bound for every u >= 0.5).
ONE = np.float32(1.0)
ONE_UP = np.nextafter(ONE, np.float32(2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sample_never_equals_high(dtype):
    lo = dtype(1.0)
    for k in range(1, 6):
        hi = lo
        for _ in range(k):
            hi = np.nextafter(hi, dtype(2.0))
        out = TorchGenerator(k).uniform((4000,), float(lo), float(hi), dtype=dtype)
        assert out.dtype == dtype and out.min() >= lo and out.max() < hi


def test_one_ulp_range_gives_low_as_torch():
    out = TorchGenerator(0).uniform(12, float(ONE), float(ONE_UP))
    np.testing.assert_array_equal(out, np.full(12, ONE))


def test_low_equal_high_gives_low():
    np.testing.assert_array_equal(TorchGenerator(0).uniform(5, 2.5, 2.5), np.full(5, np.float32(2.5)))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_narrow_and_wide_ranges_bit_for_bit_against_torch(dtype):
    torch = pytest.importorskip("torch")
    np_dtype = np.dtype(dtype).type
    rng = np.random.default_rng(1)
    for trial in range(60):
        lo = np_dtype(rng.uniform(-10, 10) * 10.0 ** rng.integers(-3, 3))
        hi = lo
        for _ in range(int(rng.integers(1, 9))):
            hi = np.nextafter(hi, np_dtype(np.inf))
        if trial % 3 == 0:
            hi = np_dtype(lo + np_dtype(rng.uniform(0, 5)))
        torch.manual_seed(trial)
        want = torch.empty(300, dtype=getattr(torch, dtype)).uniform_(float(lo), float(hi)).numpy()
        got = TorchGenerator(trial).uniform((300,), float(lo), float(hi), dtype=np_dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"[{lo!r}, {hi!r})")
