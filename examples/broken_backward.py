"""Self-attention with a hand-written backward, as learners write it, and the classic backward mistakes.

Each pair NAME_forward(x, W_query, W_key, W_value) -> (out, cache) and NAME_backward(d_out,
cache) -> (dx, dW_query, dW_key, dW_value) is the book's SelfAttention_v1 with its backward
derived by hand (docs/derivations.md); in each broken one exactly one line of the backward
differs. The forward is always right. Check one from the command line:

    npattn check examples/broken_backward.py:no_rowsum

or run this file to see the verdict on all of them:

    python examples/broken_backward.py
"""

import sys
from pathlib import Path

import numpy as np


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_forward(x, W_query, W_key, W_value):
    """x (n, d_in), W_* (d_in, d_out) -> context_vec (n, d_out), and what the backward needs."""
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    scale = 1 / np.sqrt(keys.shape[-1])
    attn_weights = softmax(queries @ keys.T * scale, axis=-1)
    context_vec = attn_weights @ values
    return context_vec, (x, W_query, W_key, W_value, queries, keys, values, attn_weights, scale)


def attention_backward(d_out, cache):
    """Correct: docs/derivations.md, "The whole single-head backward"."""
    x, W_query, W_key, W_value, queries, keys, values, A, scale = cache
    dA, d_values = d_out @ values.T, A.T @ d_out  # context_vec = A @ values
    d_scores = scale * A * (dA - np.sum(dA * A, axis=-1, keepdims=True))  # A = softmax(scores * scale)
    d_queries, d_keys = d_scores @ keys, d_scores.T @ queries  # scores = queries @ keys.T
    dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
    return dx, x.T @ d_queries, x.T @ d_keys, x.T @ d_values


no_rowsum_forward = diagonal_forward = no_transpose_forward = missing_path_forward = attention_forward


def no_rowsum_backward(d_out, cache):
    x, W_query, W_key, W_value, queries, keys, values, A, scale = cache
    dA, d_values = d_out @ values.T, A.T @ d_out
    d_scores = scale * A * dA  # BUG: the softmax backward without the - rowsum(dA * A) term
    d_queries, d_keys = d_scores @ keys, d_scores.T @ queries
    dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
    return dx, x.T @ d_queries, x.T @ d_keys, x.T @ d_values


def diagonal_backward(d_out, cache):
    x, W_query, W_key, W_value, queries, keys, values, A, scale = cache
    dA, d_values = d_out @ values.T, A.T @ d_out
    d_scores = scale * A * (1 - A) * dA  # BUG: s(1 - s), only the Jacobian's diagonal
    d_queries, d_keys = d_scores @ keys, d_scores.T @ queries
    dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
    return dx, x.T @ d_queries, x.T @ d_keys, x.T @ d_values


def no_transpose_backward(d_out, cache):
    x, W_query, W_key, W_value, queries, keys, values, A, scale = cache
    dA, d_values = d_out @ values.T, A.T @ d_out
    d_scores = scale * A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    d_queries, d_keys = d_scores @ keys, d_scores @ queries  # BUG: dK = dS @ Q, the transpose missing
    dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
    return dx, x.T @ d_queries, x.T @ d_keys, x.T @ d_values


def missing_path_backward(d_out, cache):
    x, W_query, W_key, W_value, queries, keys, values, A, scale = cache
    dA, d_values = d_out @ values.T, A.T @ d_out
    d_scores = scale * A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    d_queries, d_keys = d_scores @ keys, d_scores.T @ queries
    dx = d_queries @ W_query.T + d_keys @ W_key.T  # BUG: the value path d_values @ W_value.T is missing
    return dx, x.T @ d_queries, x.T @ d_keys, x.T @ d_values


class SelfAttention:
    """The book's SelfAttention_v1 in NumPy with a backward that returns dx and keeps the weight
    gradients in dW_query, dW_key, dW_value; it leaves the scale out of the backward only."""

    def __init__(self, d_in, d_out):
        rng = np.random.default_rng(0)
        self.W_query, self.W_key, self.W_value = (rng.random((d_in, d_out)) for _ in range(3))

    def __call__(self, x):
        out, self.cache = attention_forward(x, self.W_query, self.W_key, self.W_value)
        return out

    def backward(self, d_out):
        x, W_query, W_key, W_value, queries, keys, values, A, scale = self.cache
        dA, d_values = d_out @ values.T, A.T @ d_out
        d_scores = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))  # BUG: the scale left out
        d_queries, d_keys = d_scores @ keys, d_scores.T @ queries
        dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
        self.dW_query, self.dW_key, self.dW_value = x.T @ d_queries, x.T @ d_keys, x.T @ d_values
        return dx


EXAMPLES = ["attention", "no_rowsum", "diagonal", "no_transpose", "missing_path", "SelfAttention"]


def main():
    try:
        import npattn
    except ImportError:  # run from a source checkout without installing: use the checkout's npattn
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import npattn

    for name in EXAMPLES:
        report = npattn.check_attention(f"{__file__}:{name}")
        d = report.backward.diagnosis
        found = ", ".join(d.identifiers) or ("correct" if d.correct else "no known mistake")
        print(f"{name:<14} backward {'ok' if report.backward else 'WRONG':<6} -> {found}")
        for identifier in d.identifiers:
            print(f"{'':<16}{identifier}: {d.explain(identifier)}")


if __name__ == "__main__":
    main()
