"""The book's GPT config dict: a misspelt or unknown key is refused, not ignored."""

from __future__ import annotations

import pytest

import npattn
from npattn.nn.transformer import CONFIG_KEYS, FeedForward

CFG = {"vocab_size": 11, "context_length": 4, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
       "qkv_bias": False}  # fmt: skip


@pytest.mark.parametrize(
    "build",
    [
        lambda cfg: npattn.GPTModel(cfg, rng=0),
        lambda cfg: npattn.TransformerBlock(cfg, rng=0),
        lambda cfg: FeedForward(cfg, rng=0),
    ],
)
def test_unknown_keys_are_refused_with_the_known_ones(build) -> None:
    """GPTModel({**cfg, "emb_dimm": 3}) used to build a model with the unchanged emb_dim."""
    with pytest.raises(npattn.ConfigError) as info:
        build({**CFG, "emb_dimm": 3})
    assert "cfg has unknown key(s) 'emb_dimm'" in str(info.value)
    assert str(list(CONFIG_KEYS)) in str(info.value)


def test_the_books_configs_still_build() -> None:
    npattn.GPTModel(CFG, rng=0)
    npattn.GPTModel({**CFG, "context_length": 3, "qkv_bias": True}, rng=0)  # the book's later updates
    assert set(npattn.GPT_CONFIG_124M) == set(CONFIG_KEYS)
