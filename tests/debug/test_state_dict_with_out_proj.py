"""``check_rows`` and ``diagnose`` given a MultiHeadAttention's state dict (with ``out_proj.*``) and
the module's output: the out_proj entries were accepted and ignored, and right output FAILED. They
now mark the weights as a module's do: the output after out_proj is refused saying what to pass,
the merged heads pass, and diagnose (one head, no out_proj) refuses them."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError

BB = npattn.book_batch()


def test_check_rows_names_the_out_proj_and_passes_the_merged_heads():
    mha = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=2, dtype=np.float64)
    with pytest.raises(ConfigError, match=r"output after out_proj, but check_rows checks merged_heads"):
        npattn.check_rows(BB, mha.state_dict(), mha(BB), num_heads=2, causal=True)
    merged = npattn.trace(mha, BB)["merged_heads"]
    assert npattn.check_rows(BB, mha.state_dict(), merged, num_heads=2, causal=True).passed
    assert not npattn.check_rows(BB, mha.state_dict(), merged * 1.001, num_heads=2, causal=True).passed


def test_diagnose_refuses_a_state_dict_with_an_out_proj():
    one = npattn.MultiHeadAttention(3, 4, 6, 0.0, 1, rng=2, dtype=np.float64)
    with pytest.raises(ConfigError, match=r"these are the weights of a state dict with an out_proj"):
        npattn.diagnose(BB, one.state_dict(), one(BB), causal=True)
