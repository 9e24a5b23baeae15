"""Every module constructor refuses, before allocating, sizes whose arrays exceed this machine's
memory: a ConfigError naming the argument and the bytes, never NumPy's "array is too big" or a
process killed while it fills a mask."""

import numpy as np
import pytest

import npattn
import npattn._checks as checks
from npattn.nn import functional as F
from npattn.nn.gpt import GPTModel
from npattn.nn.layers import Linear
from npattn.nn.transformer import Embedding, LayerNorm

BIG = 10**12
GPT = {
    "vocab_size": 10,
    "context_length": 4,
    "emb_dim": 4,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": False,
}


@pytest.mark.parametrize(
    "build,fragment",
    [
        (lambda: npattn.CausalAttention(3, 2, BIG, 0.0), f"context_length={BIG}: the causal mask"),
        (lambda: npattn.MultiHeadAttention(3, 2, BIG, 0.0, 2), f"context_length={BIG}: the causal mask"),
        (lambda: npattn.MultiHeadAttentionWrapper(3, 2, BIG, 0.0, 2), f"context_length={BIG}"),
        (lambda: npattn.MultiHeadAttentionWrapper(3, 2, 4, 0.0, 10**9), "num_heads=1000000000 heads"),
        (lambda: npattn.SelfAttention_v1(BIG, 2), f"a parameter (shape ({BIG}, 2), float32)"),
        (lambda: npattn.SelfAttention_v2(3, BIG), f"a parameter (shape ({BIG}, 3), float32)"),
        (lambda: npattn.MultiHeadAttention(3, BIG * 2, 4, 0.0, 2), "a parameter"),
        (lambda: Linear(10**7, 10**7), "a parameter (shape (10000000, 10000000), float32)"),
        (lambda: Embedding(BIG, 3, dtype=np.float64), f"a parameter (shape ({BIG}, 3), float64)"),
        (lambda: LayerNorm(BIG), f"LayerNorm(emb_dim={BIG}): scale and shift"),
        (lambda: GPTModel({**GPT, "vocab_size": BIG}), f"GPTModel(cfg) with vocab_size={BIG}"),
        (lambda: GPTModel({**GPT, "n_layers": 10**9}), "n_layers=1000000000"),
        (lambda: GPTModel({**GPT, "context_length": 10**7}), "context_length=10000000"),
        (lambda: F.causal_mask(10**7), "causal_mask(10000000, 10000000)"),
    ],
)
def test_constructors_refuse_sizes_beyond_memory(build, fragment):
    with pytest.raises(npattn.ConfigError, match=r"would need [0-9,]+ bytes .*more than this machine's memory") as info:
        build()
    assert fragment in str(info.value)


def test_the_bound_is_this_machines_memory(monkeypatch):
    monkeypatch.setattr(checks, "physical_memory", lambda: 10**6)
    npattn.CausalAttention(3, 2, 1000, 0.0)  # a 1,000,000-byte mask fits
    with pytest.raises(npattn.ConfigError, match=r"context_length=1001: the causal mask .* 1,002,001 bytes"):
        npattn.CausalAttention(3, 2, 1001, 0.0)
    with pytest.raises(
        npattn.ConfigError,
        match=r"shape \(501, 500\), float32\) would need 1,002,000 bytes \(978.5 KiB\), more than .* \(976.6 KiB\)",
    ):
        Linear(500, 501)
    Linear(500, 500, dtype=np.float16)


def test_causal_mask_is_the_books():
    for n, m in [(0, 0), (1, 1), (4, 4), (3, 5), (5, 3)]:
        np.testing.assert_array_equal(F.causal_mask(n, m), np.triu(np.ones((n, m), dtype=bool), k=1))
    assert F.causal_mask(4).dtype == bool
    with pytest.raises(npattn.ConfigError, match=r"causal_mask: m must be an integer >= 0, got 2\.5"):
        F.causal_mask(2, 2.5)
