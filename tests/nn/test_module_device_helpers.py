"""Module.half(), .cpu() and .cuda(): PyTorch's shorthands for to(np.float16), to("cpu"), to("cuda")."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def _mha():
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=1)


def test_half_is_to_float16():
    module = _mha()
    assert module.half() is module
    assert all(p.data.dtype == np.float16 for p in module.parameters())
    assert module(npattn.book_batch().astype(np.float16)).dtype == np.float16


def test_cpu_returns_self_and_keeps_the_forward():
    module = _mha()
    out = module(npattn.book_batch())
    weights = [p.data for p in module.parameters()]
    assert module.cpu() is module
    assert all(a is p.data for a, p in zip(weights, module.parameters()))
    assert module.backward(np.ones_like(out)).shape == npattn.book_batch().shape


@pytest.mark.parametrize("args", [(), (0,), ("cuda:1",)])
def test_cuda_is_refused_like_to_cuda(args):
    module = _mha()
    before = [p.data.copy() for p in module.parameters()]
    with pytest.raises(ConfigError, match=r"npattn runs on the CPU only: .*got device 'cuda"):
        module.cuda(*args)
    assert all(np.array_equal(a, p.data) for a, p in zip(before, module.parameters()))
