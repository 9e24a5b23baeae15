"""Self-attention as learners write it, with the classic mistakes, and what npattn says about each.

Each function below takes (x, W_query, W_key, W_value), the way you might write attention by
hand in NumPy; the class is written like the book's SelfAttention_v1. Exactly one line differs
from the correct version in each. Check one from the command line:

    npattn check examples/broken_attention.py:softmax_over_queries

or run this file to see the tools' verdict on all of them:

    python examples/broken_attention.py
"""

import sys
from pathlib import Path

import numpy as np


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def self_attention(x, W_query, W_key, W_value):
    """Correct: the book's section 3.4."""
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    return attn_weights @ values


def softmax_over_queries(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=0)  # BUG: axis=0 normalises over queries
    return attn_weights @ values


def no_scaling(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores, axis=-1)  # BUG: forgot / sqrt(d_out)
    return attn_weights @ values


def scaled_by_input_dim(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / x.shape[-1] ** 0.5, axis=-1)  # BUG: sqrt(d_in), not sqrt(d_out)
    return attn_weights @ values


def divide_by_row_sum(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = attn_scores / attn_scores.sum(axis=-1, keepdims=True)  # BUG: section 3.3.1's naive version
    return attn_weights @ values


def weights_on_keys(x, W_query, W_key, W_value):
    queries, keys = x @ W_query, x @ W_key
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    return attn_weights @ keys  # BUG: the context vectors combine the values, not the keys


def weights_transposed(x, W_query, W_key, W_value):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    return attn_weights.T @ values  # BUG: transposed weights


def projects_to_d_in(x, W_query, W_key, W_value):
    queries, keys = x @ W_query, x @ W_key
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    return attn_weights @ x  # BUG: the values were never projected (section 3.3): d_in columns come out


class SelfAttentionSwapped:
    """The book's SelfAttention_v1 in NumPy, with queries and keys swapped in the scores."""

    def __init__(self, d_in, d_out):
        rng = np.random.default_rng(0)
        self.W_query = rng.random((d_in, d_out))
        self.W_key = rng.random((d_in, d_out))
        self.W_value = rng.random((d_in, d_out))

    def __call__(self, x):
        queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
        attn_scores = keys @ queries.T  # BUG: keys @ queries.T is the transpose of the scores
        attn_weights = softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
        return attn_weights @ values


def no_scaling_with_stages(x, W_query, W_key, W_value):
    """no_scaling again, returning every intermediate under npattn's stage names, for npattn.compare."""
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    attn_scores = queries @ keys.T
    attn_weights = softmax(attn_scores, axis=-1)  # BUG: forgot / sqrt(d_out)
    context_vec = attn_weights @ values
    return {
        "queries": queries,
        "keys": keys,
        "values": values,
        "attn_scores": attn_scores,
        "attn_weights": attn_weights,
        "context_vec": context_vec,
    }


EXAMPLES = [
    "self_attention",
    "softmax_over_queries",
    "no_scaling",
    "scaled_by_input_dim",
    "divide_by_row_sum",
    "weights_on_keys",
    "weights_transposed",
    "projects_to_d_in",
    "SelfAttentionSwapped",
]


def main():
    try:
        import npattn
    except ImportError:  # run from a source checkout without installing: use the checkout's npattn
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import npattn
    from npattn.debug.usercode import UserAttention, check_attention

    x, weights = npattn.book_inputs(), npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=123))
    for name in EXAMPLES:
        target = globals()[name]
        kind = "class" if isinstance(target, type) else "function"
        report = check_attention(UserAttention(name, kind, target), x=x, weights=weights)
        d = report.diagnosis
        found = ", ".join(d.identifiers) or ("correct" if d.correct else "no known mistake")
        rows = "rows skipped" if report.row_check is None else "rows ok" if report.row_check else "rows differ"
        shapes = "shapes ok" if report.shape_check else "shape mismatch"
        print(f"{name:<22} {shapes:<15} {rows:<13} -> {found}")
        for identifier in d.identifiers:
            print(f"{'':<24}{identifier}: {d.explain(identifier)}")

    print("\nStage by stage, npattn.SelfAttention_v1 against no_scaling_with_stages:")
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    print(npattn.compare(model, no_scaling_with_stages, x, weights=weights))


if __name__ == "__main__":
    main()
