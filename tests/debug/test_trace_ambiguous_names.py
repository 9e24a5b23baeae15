"""A plain stage name that several sub-modules recorded is refused with their full names; it used
to return the first head's (or block's) array silently."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def _wrapper_trace():
    return npattn.trace(npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, rng=1).eval(), npattn.book_batch())


def test_shared_plain_name_in_a_wrapper_is_refused():
    t = _wrapper_trace()
    with pytest.raises(ConfigError, match=r"heads\.0\.attn_weights, heads\.1\.attn_weights"):
        t["attn_weights"]
    assert "attn_weights" in t
    assert t["heads.1.attn_weights"].shape == (2, 6, 6)
    assert not np.array_equal(t["heads.0.attn_weights"], t["heads.1.attn_weights"])


def test_own_stage_of_the_traced_module_is_found_by_its_name():
    t = _wrapper_trace()  # the wrapper's own context_vec (the heads side by side), not a head's
    assert t["context_vec"].shape == (2, 6, 4)
    assert np.array_equal(t["context_vec"], np.concatenate([t["heads.0.context_vec"], t["heads.1.context_vec"]], -1))


def test_shared_plain_name_across_gpt_blocks_is_refused():
    cfg = {"vocab_size": 9, "context_length": 4, "emb_dim": 4, "n_heads": 2, "n_layers": 2,
           "drop_rate": 0.0, "qkv_bias": False}
    t = npattn.trace(npattn.GPTModel(cfg, rng=2).eval(), np.array([[1, 2, 3]]))
    with pytest.raises(ConfigError, match=r"trf_blocks\.0\.att\.queries, trf_blocks\.1\.att\.queries"):
        t["queries"]
    assert t["trf_blocks.1.att.queries"].shape == (1, 3, 4)


def test_unique_plain_name_still_works_and_unknown_is_a_key_error():
    t = npattn.trace(npattn.MultiHeadAttention(3, 2, 6, 0.0, 2, rng=1).eval(), npattn.book_batch())
    assert t["attn_weights"].shape == (2, 2, 6, 6)
    t1 = _wrapper_trace()
    assert t1.stage("heads.0.x").qualname == "heads.0.x"
    with pytest.raises(KeyError, match="no stage named 'nope'"):
        t1["nope"]
    assert "<table" in t1._repr_html_()  # the heatmap takes the first head's weights, as it says
