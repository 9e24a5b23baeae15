"""``weights_of(MultiHeadAttentionWrapper)`` (and so ``check_rows`` given its weights) said the module
had "nothing of the kind"; its weights are per head, and the message now says how to check it."""

import pytest

import npattn
from npattn.errors import ConfigError


def test_the_wrapper_is_pointed_to_check_rows_of():
    wrapper = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1)
    with pytest.raises(ConfigError, match=r"its weights are per head .*check_rows_of\(module\).*module\.heads\[0\]"):
        npattn.weights_of(wrapper)
    assert npattn.check_rows_of(wrapper, npattn.book_batch()).passed
    npattn.weights_of(wrapper.heads[0])  # one head has the three matrices


def test_the_wrappers_state_dict_is_pointed_on_too():
    wrapper = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1)
    xb = npattn.book_batch()
    with pytest.raises(ConfigError, match=r"the keys are per head \(heads\.0\., heads\.1\.\.\.\.\).*check_rows_of"):
        npattn.check_rows(xb, wrapper.state_dict(), wrapper(xb), num_heads=2, causal=True)
    with pytest.raises(ConfigError, match=r"unknown key 'W_querry' \(did you mean 'W_query'\?\)"):
        npattn.weights_of({"W_querry": 1, "W_key": 1, "W_value": 1})


def test_a_stray_mask_key_is_an_unknown_key_not_a_wrapper():
    import numpy as np

    weights = dict(npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=1)), mask=np.zeros((6, 6)))
    with pytest.raises(ConfigError, match=r"grads: unknown key 'mask'"):
        from npattn.debug.weights import refuse_unknown_keys

        refuse_unknown_keys({"x": 1, "mask": 1}, ("x", "W_query", "W_key", "W_value"), "grads")
    assert weights
