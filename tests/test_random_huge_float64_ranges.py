"""float64 ``uniform`` and ``normal`` over ranges near float64's largest numbers: the emulated
fused multiply-add split operands by multiplying with 2**27 + 1, which overflowed above about
1.3e300, so ``uniform(-7e299, 7e299)`` and ``normal(0, 1e307)`` gave NaN where torch gives finite
numbers. Checked against exact rational arithmetic, and against torch when it is installed."""

from fractions import Fraction

import numpy as np
import pytest

from npattn.random import TorchGenerator
from npattn.random.fma import fma_float64


def _exact(a: float, b: float, c: float) -> float:
    value = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(value)  # rounded once, to nearest even
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def test_fma_float64_is_rounded_once_near_overflow():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, 3000) * 10.0 ** rng.integers(250, 309, 3000)
    b = rng.uniform(-1, 1, 3000) * 10.0 ** rng.integers(-300, 8, 3000)
    c = rng.uniform(-1, 1, 3000) * 10.0 ** rng.integers(-10, 306, 3000)
    with np.errstate(over="ignore"):
        a = np.where(np.isfinite(a), a, 1.7e308)
    got = fma_float64(a, b, c)
    assert np.array_equal(got, [_exact(*v) for v in zip(a, b, c)])
    assert np.array_equal(fma_float64(b, a, c), got)  # either operand may be the large one


@pytest.mark.parametrize(("low", "high"), [(-7e299, 7e299), (0.0, 1.5e300), (1e300, 1.7e308)])
def test_uniform_over_a_huge_range_is_finite_and_exact(low, high):
    draws = TorchGenerator(8).uniform((400,), low, high, dtype=np.float64)
    u = TorchGenerator(8).uniform((400,), 0.0, 1.0, dtype=np.float64)  # the same stream's [0, 1) draws
    assert np.isfinite(draws).all() and (draws >= low).all() and (draws <= high).all()
    assert np.array_equal(draws, [_exact(x, high - low, low) for x in u])


@pytest.mark.parametrize(("mean", "std"), [(0.0, 1e307), (1e308, 1e307), (-5e307, 3e300)])
def test_normal_with_a_huge_std_matches_torch(mean, std):
    torch = pytest.importorskip("torch")
    got = TorchGenerator(8).normal((300,), mean, std, dtype=np.float64)
    want = torch.empty(300, dtype=torch.float64).normal_(mean, std, generator=torch.Generator().manual_seed(8))
    assert not np.isnan(got).any()
    assert np.array_equal(got, want.numpy())


def test_uniform_over_a_huge_range_matches_torch():
    torch = pytest.importorskip("torch")
    got = TorchGenerator(3).uniform((500,), -7e299, 7e299, dtype=np.float64)
    want = torch.empty(500, dtype=torch.float64).uniform_(-7e299, 7e299, generator=torch.Generator().manual_seed(3))
    assert np.array_equal(got, want.numpy())
