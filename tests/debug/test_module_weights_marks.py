"""weights_of(MultiHeadAttention) says what the module does beyond one head's projections, so
check_rows and diagnose refuse what they would misjudge instead of calling right code wrong."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def _mha():
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=123, dtype=np.float64)


X = npattn.book_inputs().astype(np.float64)[None]


def test_check_rows_refuses_the_output_after_out_proj_and_passes_merged_heads():
    mh = _mha()
    W = npattn.weights_of(mh)
    with pytest.raises(ConfigError, match=r"output is the MultiHeadAttention's output after out_proj"):
        npattn.check_rows(X, W, mh(X), causal=True, num_heads=2)
    merged = npattn.trace(mh, X)["merged_heads"]
    assert npattn.check_rows(X, W, merged, causal=True, num_heads=2).passed
    assert not npattn.check_rows(X, W, merged * 1.01, causal=True, num_heads=2).passed  # wrong still fails


def test_check_rows_refuses_a_head_count_the_module_contradicts():
    with pytest.raises(ConfigError, match=r"with num_heads=2, checked with num_heads=1; pass num_heads=2"):
        npattn.check_rows(X, npattn.weights_of(_mha()), _mha()(X), causal=True)


def test_diagnose_refuses_multi_head_weights():
    mh = _mha()
    with pytest.raises(ConfigError, match=r"diagnose models one head .* 2 heads and an out_proj"):
        npattn.diagnose(X, npattn.weights_of(mh), mh(X), causal=True)
    with pytest.raises(ConfigError, match=r"diagnose models one head"):
        npattn.diagnose(X, mh, mh(X), causal=True)


def test_single_head_weights_are_a_plain_dict_and_still_judged():
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    W = npattn.weights_of(m)
    assert type(W) is dict
    assert npattn.diagnose(npattn.book_inputs(), W, m(npattn.book_inputs())).correct
