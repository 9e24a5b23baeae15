"""Mappings the debugging tools refuse rather than read half of: diagnose_backward's grads with a
key it does not know (a typo would be ignored), and weights naming one matrix twice (W_query and
W_query.weight: which one to use would be a guess)."""

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


def _attn(x, W_query, W_key, W_value):
    return npattn.nn.functional.attention_forward(x @ W_query, x @ W_key, x @ W_value)[0]


@pytest.mark.parametrize("tool", ["weights_of", "check_rows", "diagnose", "compare"])
def test_a_weights_mapping_naming_one_matrix_twice_is_refused(tool):
    x, weights, _, _ = _book_grads()
    W = dict(weights)
    W["W_query.weight"] = 2 * W["W_query"].T  # conflicts with W["W_query"]
    m = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    output = m(x)
    calls = {
        "weights_of": lambda: npattn.weights_of(W),
        "check_rows": lambda: npattn.check_rows(x, W, output),
        "diagnose": lambda: npattn.diagnose(x, W, output),
        "compare": lambda: npattn.compare(_attn, _attn, x, weights=W),
    }
    with pytest.raises(ConfigError, match=r"W_query twice, as 'W_query' \(d_in, d_out\) and as 'W_query.weight'"):
        calls[tool]()
    W["W_query.weight"] = W.pop("W_query").T  # one spelling, the same matrix: read (and transposed)
    assert np.array_equal(npattn.weights_of(W)["W_query"], weights["W_query"])
    assert npattn.check_rows(x, W, output).passed and npattn.compare(_attn, _attn, x, weights=W).passed
