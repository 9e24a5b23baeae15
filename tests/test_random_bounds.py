"""TorchGenerator's arguments: torch's default seed, bounds in the dtype's range, sizes bounded by
memory, int shapes, states with exactly get_state's keys."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest

import npattn
from npattn.random import TorchGenerator
from npattn.random.generator import TORCH_DEFAULT_SEED


def test_without_a_seed_the_stream_is_torchs_default_generators() -> None:
    """TorchGenerator() used seed 0; torch.Generator() starts from 67280421310721."""
    g = TorchGenerator()
    assert g.initial_seed() == TORCH_DEFAULT_SEED == 67280421310721
    # torch.rand(3, generator=torch.Generator()) on torch 2.13, measured
    np.testing.assert_array_equal(g.rand(3), np.array([0.26729524, 0.8725283, 0.33528882], np.float32))


def test_without_a_seed_matches_torch_live() -> None:
    torch = pytest.importorskip("torch")
    assert torch.Generator().initial_seed() == TORCH_DEFAULT_SEED
    np.testing.assert_array_equal(TorchGenerator().rand(5), torch.rand(5, generator=torch.Generator()).numpy())


@pytest.mark.parametrize(("low", "high"), [(-3e38, 3e38), (-1e39, 0.0), (0.0, 1e39)])
def test_float32_uniform_refuses_bounds_beyond_float32(low: float, high: float) -> None:
    """uniform((3,), -3e38, 3e38) gave [inf inf inf] in float32 (float64 is fine: the span fits)."""
    with pytest.raises(npattn.ConfigError, match="finite in float32"):
        TorchGenerator(1).uniform((3,), low, high)


def test_float64_uniform_takes_the_same_bounds() -> None:
    assert np.isfinite(TorchGenerator(1).uniform((3,), -3e38, 3e38, np.float64)).all()


def test_uniform_takes_an_int_shape_like_torch_empty() -> None:
    """uniform(3, 0, 1) was a TypeError naming rand()."""
    np.testing.assert_array_equal(TorchGenerator(1).uniform(3, 0, 1), TorchGenerator(1).uniform((3,), 0, 1))


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.rand(2**20, 2**20),
        lambda g: g.rand(2**20, 2**20, dtype=np.float64),
        lambda g: g.randn(2**20, 2**20),
        lambda g: g.uniform((2**20, 2**20), 0, 1),
        lambda g: g.normal((2**20, 2**20)),
        lambda g: g.bernoulli((2**20, 2**20), 0.5),
    ],
)
def test_draws_larger_than_memory_are_refused_before_drawing(call: Any) -> None:
    """rand(2**20, 2**20) was a MemoryError (4 TiB) while 2**70 elements got a ConfigError."""
    g = TorchGenerator(1)
    with pytest.raises(npattn.ConfigError, match=r"would need [\d,]+ bytes .* more than this machine's memory"):
        call(g)
    np.testing.assert_array_equal(g.rand(2), TorchGenerator(1).rand(2))  # nothing was drawn


def test_the_bound_counts_bytes_on_a_small_machine() -> None:
    with mock.patch("npattn._checks.physical_memory", return_value=2**20):
        with pytest.raises(npattn.ConfigError, match="rand of shape"):
            TorchGenerator(1).rand(1024, 512)  # 2 MiB of samples
        TorchGenerator(1).rand(256, 256)


def test_set_state_refuses_unknown_keys() -> None:
    g = TorchGenerator(5)
    before = g.get_state()
    with pytest.raises(npattn.ConfigError, match=r"unknown key\(s\) \['sede'\]"):
        g.set_state({**TorchGenerator(7).get_state(), "sede": 3})
    assert g.get_state()["pos"] == before["pos"] and g.initial_seed() == 5
    g.set_state(TorchGenerator(7).get_state())  # the keys get_state returns still load
    state = TorchGenerator(7).get_state()
    del state["normal_cache"]  # may be absent
    g.set_state(state)
