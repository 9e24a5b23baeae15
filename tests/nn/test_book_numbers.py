"""The book's published digits (chapter 3, sections 3.3 and 3.4), to the printed 4 decimals."""

import math

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F

ATOL = 1e-4  # the book prints 4 decimals


@pytest.fixture
def inputs() -> np.ndarray:
    return npattn.book_inputs()


def test_section_3_3_no_trainable_weights(inputs):
    # 3.3.1: the query x^(2) against every input.
    query = inputs[1]
    attn_scores_2 = inputs @ query
    np.testing.assert_allclose(attn_scores_2, [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865], atol=ATOL)
    np.testing.assert_allclose(
        attn_scores_2 / attn_scores_2.sum(), [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656], atol=ATOL
    )
    np.testing.assert_allclose(F.softmax(attn_scores_2), [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581], atol=ATOL)
    context_vec_2 = F.softmax(attn_scores_2) @ inputs
    np.testing.assert_allclose(context_vec_2, [0.4419, 0.6515, 0.5683], atol=ATOL)
    # 3.3.2: all context vectors, through the same stage functions (scale 1: no scaling in 3.3).
    attn_scores, _ = F.scores_forward(inputs, inputs)
    attn_weights, _ = F.softmax_forward(attn_scores, scale=1.0)
    np.testing.assert_allclose(attn_weights.sum(axis=-1), 1.0, rtol=1e-6)
    all_context_vecs, _ = F.context_forward(attn_weights, inputs)
    expected = [
        [0.4421, 0.5931, 0.5790],
        [0.4419, 0.6515, 0.5683],
        [0.4431, 0.6496, 0.5671],
        [0.4304, 0.6298, 0.5510],
        [0.4671, 0.5910, 0.5266],
        [0.4177, 0.6503, 0.5645],
    ]
    np.testing.assert_allclose(all_context_vecs, expected, atol=ATOL)


def test_section_3_4_weights_from_seed_123():
    g = npattn.TorchGenerator(123)
    W_query, W_key, W_value = g.rand(3, 2), g.rand(3, 2), g.rand(3, 2)
    np.testing.assert_allclose(W_query, [[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]], atol=ATOL)
    np.testing.assert_allclose(W_key, [[0.1366, 0.1025], [0.1841, 0.7264], [0.3153, 0.6871]], atol=ATOL)
    np.testing.assert_allclose(W_value, [[0.0756, 0.1966], [0.3164, 0.4017], [0.1186, 0.8274]], atol=ATOL)
    model = npattn.SelfAttention_v1(3, 2, rng=npattn.TorchGenerator(123))
    np.testing.assert_array_equal(model.W_query.data, W_query)
    np.testing.assert_array_equal(model.W_key.data, W_key)
    np.testing.assert_array_equal(model.W_value.data, W_value)


def test_section_3_4_step_by_step(inputs):
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    W_query, W_key, W_value = model.W_query.data, model.W_key.data, model.W_value.data
    x_2 = inputs[1]
    query_2 = x_2 @ W_query
    np.testing.assert_allclose(query_2, [0.4306, 1.4551], atol=ATOL)
    keys = inputs @ W_key
    values = inputs @ W_value
    assert keys.shape == (6, 2) and values.shape == (6, 2)
    assert abs(query_2 @ keys[1] - 1.8524) < ATOL
    attn_scores_2 = query_2 @ keys.T
    np.testing.assert_allclose(attn_scores_2, [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440], atol=ATOL)
    d_k = keys.shape[-1]
    attn_weights_2 = F.softmax(attn_scores_2 / d_k**0.5)
    np.testing.assert_allclose(attn_weights_2, [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820], atol=ATOL)
    context_vec_2 = attn_weights_2 @ values
    np.testing.assert_allclose(context_vec_2, [0.3061, 0.8210], atol=ATOL)


def test_self_attention_v1_output(inputs):
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    out = model(inputs)
    expected = [
        [0.2996, 0.8053],
        [0.3061, 0.8210],
        [0.3058, 0.8203],
        [0.2948, 0.7939],
        [0.2927, 0.7891],
        [0.2990, 0.8040],
    ]
    assert out.shape == (6, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_seed_article_row_check_every_token(inputs):
    """Row i of the batched output equals the single-token computation for token i."""
    model = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    out = model(inputs.astype(np.float64))
    W_query, W_key, W_value = model.W_query.data, model.W_key.data, model.W_value.data
    x = inputs.astype(np.float64)
    for i in range(len(x)):
        query_i = x[i] @ W_query
        scores_i = np.array([query_i @ (x[j] @ W_key) for j in range(len(x))])
        weights_i = np.exp(scores_i / math.sqrt(2)) / np.exp(scores_i / math.sqrt(2)).sum()
        context_i = sum(weights_i[j] * (x[j] @ W_value) for j in range(len(x)))
        np.testing.assert_allclose(out[i], context_i, rtol=1e-13, atol=1e-15)
