"""compare judges each column of each stage relative to its own values: a context vector whose
small column is sign-flipped diverges next to a large column, while float32 rounding of a correct
implementation does not."""

import numpy as np

import npattn
from npattn.book import book_inputs

X = book_inputs()
W = {k: np.random.default_rng(i).random((3, 2)) for i, k in enumerate(["W_query", "W_key", "W_value"])}
W["W_value"][:, 1] *= 1e-7


def reference(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    scores = queries @ keys.T
    weights = np.exp(scores / np.sqrt(2))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ values


def small_column_flipped(x, W_query, W_key, W_value):
    out = reference(x, W_query, W_key, W_value)
    out[:, 1] *= -1
    return out


def in_float32(x, W_query, W_key, W_value):
    f = np.float32
    return reference(x.astype(f), W_query.astype(f), W_key.astype(f), W_value.astype(f))


def test_a_wrong_small_column_diverges():
    result = npattn.compare(reference, small_column_flipped, X, weights=W)
    assert not result and result.first_divergence == "context_vec"


def test_float32_rounding_of_every_column_passes():
    assert npattn.compare(reference, in_float32, X, weights=W)


def test_check_rows_given_a_trace_points_to_its_arrays():
    import pytest

    mha = npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=0)
    x = np.random.default_rng(0).random((1, 6, 3))
    with pytest.raises(npattn.ConfigError, match=r"output is a Trace, not an array; .*check_rows_of"):
        npattn.check_rows(x, mha, npattn.trace(mha, x), causal=True, num_heads=2)


def test_diagnose_backward_judges_float32_gradients_to_float32_precision():
    for seed in range(40):
        G = np.random.RandomState(seed).randn(6, 2).astype(np.float32)
        model = npattn.SelfAttention_v1(3, 2, rng=1)
        model(X)
        dx = model.backward(G)
        grads = {"x": dx, "W_query": model.W_query.grad, "W_key": model.W_key.grad, "W_value": model.W_value.grad}
        assert npattn.debug.diagnose_backward(X, npattn.weights_of(model), G, grads).correct, seed
    grads["W_query"] = grads["W_query"] * np.float32(1.01)  # 1% off still fails at float32 precision
    assert not npattn.debug.diagnose_backward(X, npattn.weights_of(model), G, grads).correct
