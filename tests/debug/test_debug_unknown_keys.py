"""diagnose_backward refuses a grads mapping with a key it does not know (a typo would otherwise
be ignored and the gradient it names judged without the user's value)."""

import numpy as np
import pytest

import npattn
from npattn.debug.backward import diagnose_backward
from npattn.errors import ConfigError


def _book_grads():
    x = npattn.book_inputs().astype(np.float64)
    m = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    G = np.random.default_rng(0).standard_normal((6, 2))
    m(x)
    dx = m.backward(G)
    grads = {"x": dx, "W_query": m.W_query.grad, "W_key": m.W_key.grad, "W_value": m.W_value.grad}
    return x, npattn.weights_of(m), G, grads


def test_diagnose_backward_refuses_an_unknown_key_and_names_the_close_one():
    x, weights, G, grads = _book_grads()
    assert diagnose_backward(x, weights, G, grads).correct
    with pytest.raises(ConfigError, match=r"unknown key 'W_querry' \(did you mean 'W_query'\?\).*x, W_query"):
        diagnose_backward(x, weights, G, {**grads, "W_querry": np.zeros((3, 2))})
    with pytest.raises(ConfigError, match=r"unknown key 'bias'; expected the keys x, W_query, W_key, W_value"):
        diagnose_backward(x, weights, G, {**grads, "bias": np.zeros(2)})
