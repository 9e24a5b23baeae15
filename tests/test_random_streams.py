"""normal_/randn, bernoulli_ and seeds of TorchGenerator against PyTorch: the committed fixture
(tests/fixtures/torch_random.npz, written by make_random_fixtures.py from the cases in
tests/random_cases.py), and live against torch when it is installed."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from random_cases import BIG_SHAPE, STREAM_CASES, digest, draw_npattn, draw_torch

import npattn
from npattn.random.fma import fma_float32, fma_float64

FIXTURES = np.load(Path(__file__).parent / "fixtures" / "torch_random.npz", allow_pickle=False)
BIG = pytest.mark.skipif(
    not os.environ.get("NPATTN_BIG_DRAWS"), reason="38.6M-value draws: set NPATTN_BIG_DRAWS=1 (.ci/run does)"
)


@pytest.mark.parametrize(("name", "seed", "draws"), STREAM_CASES, ids=[c[0] for c in STREAM_CASES])
def test_streams_match_fixture(name, seed, draws):
    got, expected = draw_npattn(seed, draws), FIXTURES[f"stream_{name}"]
    assert got.shape == expected.shape
    mismatches = int(np.sum(got != expected))
    assert mismatches == 0, f"{name}: {mismatches} of {got.size} values differ from torch's"


@pytest.mark.torch
def test_streams_match_torch_live():
    torch = pytest.importorskip("torch")
    counts = {}
    for name, seed, draws in STREAM_CASES:
        counts[name] = int(np.sum(draw_npattn(seed, draws) != draw_torch(torch, seed, draws)))
    assert not any(counts.values()), f"values differing from torch: {counts}"


@BIG
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpt2_embedding_sized_randn_matches_torch(dtype):
    got = npattn.TorchGenerator(123).randn(*BIG_SHAPE, dtype=dtype)
    assert digest(got) == str(FIXTURES[f"randn_big_{dtype}_sha256"])


def test_below_16_and_from_16_on_are_different_layouts():
    """The scalar path keeps a cached value; the 16-element layout neither uses nor clears it."""
    g = npattn.TorchGenerator(7)
    g.randn(1)  # caches the pair's second value
    assert g.get_state()["normal_cache"] == g.get_state()["normal_cache"]  # a number, not NaN
    g.randn(16)
    assert not np.isnan(g.get_state()["normal_cache"])
    g.manual_seed(7)
    assert np.isnan(g.get_state()["normal_cache"])


def test_state_round_trip_keeps_the_normal_cache():
    g = npattn.TorchGenerator(3)
    g.randn(3)
    state = g.get_state()
    after = g.randn(5)
    g.set_state(state)
    np.testing.assert_array_equal(g.randn(5), after)
    g.set_state({k: v for k, v in state.items() if k != "normal_cache"})  # older checkpoints: nothing cached
    assert np.isnan(g.get_state()["normal_cache"])


@pytest.mark.parametrize(
    ("seed", "expected"), [(-1, 2**64 - 1), (-(2**63), 2**63), (0, 0), (2**32 + 5, 2**32 + 5), (2**64 - 1, 2**64 - 1)]
)
def test_seeds_map_like_torch(seed, expected):
    g = npattn.TorchGenerator(seed)
    assert g.initial_seed() == expected
    np.testing.assert_array_equal(g.rand(4), npattn.TorchGenerator(expected % 2**32).rand(4))


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, True, 1.0, "1"])
def test_bad_seeds_are_refused(seed):
    with pytest.raises(npattn.ConfigError, match="seed must"):
        npattn.TorchGenerator(seed)


def test_manual_seed_and_the_default_generator():
    g = npattn.manual_seed(2**32 + 5)
    assert g is npattn.default_generator and npattn.initial_seed() == 2**32 + 5
    np.testing.assert_array_equal(npattn.default_generator.rand(3), npattn.TorchGenerator(5).rand(3))
    value = npattn.random.seed()  # a non-deterministic seed, like torch.seed()
    assert npattn.initial_seed() == value and 0 <= value < 2**64


def _round_to_nearest_float32(exact: Fraction) -> np.float32:
    f = np.float32(float(exact))  # may be one ulp off after double rounding: pick the nearer neighbour
    candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - exact) for c in candidates]
    best = min(dist)
    nearest = [c for c, d in zip(candidates, dist) if d == best]
    return min(nearest, key=lambda c: int(np.float32(c).view(np.uint32)) & 1)


def test_fma_rounds_once():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(3000), rng.standard_normal(3000)
    c = rng.standard_normal(3000) * 1e-3
    c[:50] = -(a[:50] * b[:50])  # cancellation
    got = fma_float64(a, b, c)
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]
    assert all(float(e) == g for e, g in zip(exact, got))
    a32, b32, c32 = (v.astype(np.float32) for v in (a, b, c * 1e-4))
    c32[:100] = np.float32(2.0**-130)  # float32 subnormal results
    a32[:100] = np.float32(2.0**-70)
    # ties: a * b + c exactly halfway between float32 neighbours after a float64 rounding
    a32[100:110], b32[100:110], c32[100:110] = np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(2.0**-60)
    got32 = fma_float32(a32, b32, c32)
    exact32 = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a32, b32, c32)]
    expected = np.array([_round_to_nearest_float32(e) for e in exact32], dtype=np.float32)
    np.testing.assert_array_equal(got32, expected)
    # the same sums without the tie correction would be wrong: the check can fail
    naive = (a32.astype(np.float64) * b32 + c32.astype(np.float64)).astype(np.float32)
    assert np.any(naive[100:110] != expected[100:110])


def _u_below_p(words, p):
    """The definition: u = (((hi << 32) | lo) & (2**53 - 1)) * 2**-53 as a float64, then u < p."""
    w = words.astype(np.uint64)
    bits = ((w[0::2] << np.uint64(32)) | w[1::2]) & np.uint64(2**53 - 1)
    return bits.astype(np.float64) * 2.0**-53 < p


def test_integer_comparison_equals_float_comparison_at_ties():
    """uniform53_below compares words as integers: equal to u < p for every p, ties of the high
    words (which random words almost never produce) and p exactly on a uniform's value included."""
    from npattn.random.generator import uniform53_below

    rng = np.random.default_rng(5)
    ps = [0.0, 1.0, 0.9, 0.5, 0.1, 2.0**-53, 1 - 2.0**-53, 5e-324, 0.3 + 2.0**-40, *rng.random(20)]
    for p in ps:
        t_hi, t_lo = divmod(int(np.ceil(p * 2.0**53)), 2**32)
        hi = rng.integers(0, 2**32, 400, dtype=np.uint32)
        lo = rng.integers(0, 2**32, 400, dtype=np.uint32)
        # planted ties: the high word's 21 kept bits equal the threshold's, junk in the masked-off bits,
        # and low words just below, at and above the threshold's
        hi[:300] = (hi[:300] & np.uint32(0xFFE00000)) | np.uint32(t_hi % 2**21)
        lo[:6] = [max(t_lo - 1, 0), t_lo, min(t_lo + 1, 2**32 - 1), 0, 2**32 - 1, t_lo]
        words = np.stack([hi, lo], axis=1).reshape(-1)
        expected = _u_below_p(words, p)
        np.testing.assert_array_equal(uniform53_below(words, p), expected, err_msg=f"p={p!r}")


def test_bernoulli_is_the_float_definition_on_a_large_draw():
    """A dropout-sized draw: bernoulli's mask equals u < p computed from the same words as floats."""
    for p in (0.9, 0.5, 0.1):
        mask = npattn.TorchGenerator(42).bernoulli((8, 4, 64, 64), p, dtype=bool)
        words = npattn.TorchGenerator(42).random_words(2 * mask.size)
        np.testing.assert_array_equal(mask.reshape(-1), _u_below_p(words, p))
