"""A GPT whose output head shares the token embedding (``out_head.weight = tok_emb.weight``, GPT-2's
tying): its state dict names the shared Parameter under both keys, as PyTorch's does, so strict
loading works both ways with a tied torch GPT. Either key alone gives the whole parameter (files
written with one key still load); the two keys holding different values are refused, nothing
changed (torch keeps whichever it copies last)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.errors import StateDictError

CFG = dict(vocab_size=20, context_length=6, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def tied(seed: int) -> npattn.GPTModel:
    model = npattn.GPTModel(CFG, rng=seed, dtype=np.float64)
    model.out_head.weight = model.tok_emb.weight
    return model


def test_both_keys_in_the_state_dict_and_a_strict_round_trip():
    model = tied(1)
    state = model.state_dict()
    assert "tok_emb.weight" in state and "out_head.weight" in state
    np.testing.assert_array_equal(state["tok_emb.weight"], state["out_head.weight"])
    assert sum(1 for _ in model.parameters()) == len(state) - 2  # parameters() names it once (no buffers here)
    other = tied(2)
    assert other.load_state_dict(state) == ([], [])
    for key, value in other.state_dict().items():
        np.testing.assert_array_equal(value, state[key])


@pytest.mark.parametrize("kept", ["tok_emb.weight", "out_head.weight"])
def test_either_key_alone_loads_the_shared_parameter(kept):
    state = tied(1).state_dict()
    del state["out_head.weight" if kept == "tok_emb.weight" else "tok_emb.weight"]
    other = tied(2)
    assert other.load_state_dict(state, strict=True) == ([], [])
    np.testing.assert_array_equal(other.out_head.weight.data, state[kept])


def test_different_values_under_the_two_keys_are_refused_and_nothing_changes():
    state = tied(1).state_dict()
    state["out_head.weight"] = state["out_head.weight"] + 1.0
    other = tied(2)
    before = other.state_dict()
    with pytest.raises(StateDictError, match=r"out_head\.weight and tok_emb\.weight name one tied parameter"):
        other.load_state_dict(state)
    for key, value in other.state_dict().items():
        np.testing.assert_array_equal(value, before[key])


def test_an_untied_model_still_needs_both_keys():
    state = tied(1).state_dict()
    del state["out_head.weight"]
    with pytest.raises(StateDictError, match=r'Missing key\(s\) in state_dict: "out_head\.weight"'):
        npattn.GPTModel(CFG, rng=2, dtype=np.float64).load_state_dict(state)


@pytest.mark.torch
def test_strict_loading_both_ways_with_a_tied_torch_gpt(book):
    import torch

    theirs = book.build_torch({"cfg": CFG})
    theirs.out_head.weight = theirs.tok_emb.weight
    ours = tied(3).eval()
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()}, strict=True)
    assert theirs.out_head.weight is theirs.tok_emb.weight
    idx = np.array([[1, 2, 3, 4]])
    with torch.no_grad():
        want = theirs.eval()(torch.from_numpy(idx)).numpy()
    np.testing.assert_allclose(ours(idx), want, rtol=0, atol=1e-12)
    with torch.no_grad():
        theirs.tok_emb.weight.mul_(2.0)
    back = tied(4)
    back.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()}, strict=True)
    np.testing.assert_array_equal(back.out_head.weight.data, theirs.out_head.weight.detach().numpy())


def test_the_two_keys_share_one_copy_and_nan_is_not_two_values():
    model = tied(1)
    state = model.state_dict()
    assert state["out_head.weight"] is state["tok_emb.weight"]
    assert not np.shares_memory(state["tok_emb.weight"], model.tok_emb.weight.data)
    state = {k: v.copy() for k, v in state.items()}
    state["tok_emb.weight"][0, 0] = state["out_head.weight"][0, 0] = np.nan
    with pytest.raises(StateDictError) as info:
        tied(2).load_state_dict(state)
    assert "non-finite values in tok_emb.weight" in str(info.value) and "tied parameter" not in str(info.value)
