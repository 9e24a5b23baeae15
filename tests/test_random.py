"""TorchGenerator against PyTorch's CPU stream: committed fixtures, and live when torch is installed."""

from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.random import linear_init_bounds, resolve_rng

FIXTURES = np.load(Path(__file__).parent / "fixtures" / "torch_random.npz", allow_pickle=False)


def test_rand_matches_fixtures():
    np.testing.assert_array_equal(npattn.TorchGenerator(123).rand(3, 2), FIXTURES["rand_f32_seed123"])
    np.testing.assert_array_equal(npattn.TorchGenerator(0).rand(7, 33), FIXTURES["rand_f32_seed0_large"])
    got = npattn.TorchGenerator(789).rand(4, 5, dtype=np.float64)
    np.testing.assert_array_equal(got, FIXTURES["rand_f64_seed789"])


def test_uniform_matches_fixtures():
    np.testing.assert_array_equal(npattn.TorchGenerator(5).uniform((40, 30), -3.7, 11.2), FIXTURES["uniform_f32_seed5"])
    got = npattn.TorchGenerator(5).uniform((40, 30), -0.3, 0.9, np.float64)
    np.testing.assert_array_equal(got, FIXTURES["uniform_f64_seed5"])


@pytest.mark.parametrize("in_features,out_features,seed", [(3, 2, 789), (7, 5, 1), (100, 16, 2)])
def test_linear_default_init_matches_fixtures(in_features, out_features, seed):
    g = npattn.TorchGenerator(seed)
    w_bound, b_bound = linear_init_bounds(in_features)
    weight = g.uniform((out_features, in_features), -w_bound, w_bound)
    bias = g.uniform((out_features,), -b_bound, b_bound)
    np.testing.assert_array_equal(weight, FIXTURES[f"linear_{in_features}_{out_features}_seed{seed}_weight"])
    np.testing.assert_array_equal(bias, FIXTURES[f"linear_{in_features}_{out_features}_seed{seed}_bias"])


def test_stream_continues_across_calls():
    g = npattn.TorchGenerator(123)
    first, second = g.rand(3, 2), g.rand(3, 2)
    both = npattn.TorchGenerator(123).rand(6, 2)
    np.testing.assert_array_equal(np.concatenate([first, second]), both)


def test_state_round_trip():
    g = npattn.TorchGenerator(7)
    g.rand(5)
    state = g.get_state()
    a = g.rand(4)
    g.set_state(state)
    np.testing.assert_array_equal(g.rand(4), a)


def test_rng_argument_kinds():
    assert isinstance(resolve_rng(123), npattn.TorchGenerator)
    gen = np.random.default_rng(0)
    assert resolve_rng(gen) is gen
    assert resolve_rng(None) is npattn.default_generator
    with pytest.raises(npattn.ConfigError, match="rng must be"):
        resolve_rng("123")
    with pytest.raises(npattn.ConfigError, match="seed"):
        npattn.TorchGenerator(2**64)
    m = npattn.SelfAttention_v1(3, 2, rng=np.random.default_rng(0))
    assert m.W_query.dtype == np.float32 and np.all((m.W_query.data >= 0) & (m.W_query.data < 1))


@pytest.mark.torch
def test_live_against_torch():
    torch = pytest.importorskip("torch")
    for seed in (0, 123, 2**32 - 1):
        torch.manual_seed(seed)
        expected = [torch.rand(17, 3).numpy(), torch.rand(5, dtype=torch.float64).numpy()]
        expected.append(torch.empty(9, 11).uniform_(-0.25, 0.5).numpy())
        g = npattn.TorchGenerator(seed)
        np.testing.assert_array_equal(g.rand(17, 3), expected[0])
        np.testing.assert_array_equal(g.rand(5, dtype=np.float64), expected[1])
        np.testing.assert_array_equal(g.uniform((9, 11), -0.25, 0.5), expected[2])
