"""load_state_dict refuses a causal mask that is not the book's, for every module holding one."""

import numpy as np
import pytest

import npattn
from npattn.errors import StateDictError

GPT_CFG = {"vocab_size": 11, "context_length": 5, "emb_dim": 8, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0,
           "qkv_bias": False}  # fmt: skip


def _modules():
    return {
        "CausalAttention": lambda: npattn.CausalAttention(3, 2, 6, 0.0, rng=1),
        "MultiHeadAttention": lambda: npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=1),
        "MultiHeadAttentionWrapper": lambda: npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1),
        "GPTModel": lambda: npattn.GPTModel(GPT_CFG, rng=3),
    }


@pytest.mark.parametrize("name", list(_modules()))
@pytest.mark.parametrize("edit", ["all_false", "inverted"])
def test_edited_mask_is_refused_and_nothing_changes(name, edit):
    make = _modules()[name]
    source = make()
    sd = {k: np.array(v) for k, v in source.state_dict().items()}
    mask_keys = [k for k in sd if k.endswith("mask")]
    assert mask_keys
    for key in mask_keys:
        sd[key][...] = False if edit == "all_false" else np.tril(np.ones_like(sd[key], dtype=bool))
    for key in [k for k in sd if not k.endswith("mask")]:
        sd[key] = sd[key] + 1.0  # would change the weights if anything were copied
    target = make()
    before = {k: np.array(v) for k, v in target.state_dict().items()}
    with pytest.raises(StateDictError, match="is not the book's causal mask") as info:
        target.load_state_dict(sd)
    for key in mask_keys:
        assert key in str(info.value)
    after = target.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("name", list(_modules()))
def test_book_float_mask_still_loads(name):
    make = _modules()[name]
    sd = {k: np.array(v) for k, v in make().state_dict().items()}
    for key in [k for k in sd if k.endswith("mask")]:
        sd[key] = np.triu(np.ones(sd[key].shape), 1)  # the book's float 0/1 buffer
    make().load_state_dict(sd)
