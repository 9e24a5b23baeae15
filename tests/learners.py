"""Attention with a hand-written backward, written the way a learner writes it (no npattn inside).

Loaded by ``npattn check tests/learners.py:NAME`` in the tests. One implementation, and one
planted mistake per name: every line that a mistake changes is marked ``# MISTAKE``.

Two code shapes for every mistake (``BUGS``):
    NAME_forward(x, W_query, W_key, W_value) -> (out, cache) and NAME_backward(d_out, cache)
        -> (dx, dW_query, dW_key, dW_value)                       (correct: ``attention_forward``)
    class NAME(d_in, d_out) with forward(x) and backward(d_out) -> (dx, dW_query, dW_key, dW_value)
                                                                  (correct: ``Attention``)
and the classes built like the book's CausalAttention(d_in, d_out, context_length, dropout)
(``Causal``, ``CausalRenormalised`` (section 3.5.1's mask-and-renormalise form)) and
MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads) (``MultiHead``, no output
projection). Class names: the correct class's name, "_", the mistake (``Attention_grad_doubled``).
Dropout draws its keep mask from ``np.random`` (the check seeds it before every forward).
"""

from types import SimpleNamespace

import numpy as np

BUGS = (
    "softmax_backward_no_rowsum",
    "softmax_backward_diagonal",
    "softmax_backward_identity",
    "softmax_backward_missing_scale",
    "softmax_backward_wrong_axis",
    "scores_backward_no_transpose",
    "context_backward_wrong_weights",
    "dx_missing_path",
    "dW_transposed",
    "grad_doubled",
)
CAUSAL_BUGS = ("mask_backward_not_zeroed", "dropout_backward_scale")
MULTIHEAD_BUGS = ("head_split_no_transpose", "scale_by_d_out_not_head_dim")


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def swap(t):
    return np.swapaxes(t, -1, -2)


def forward(x, W_query, W_key, W_value, causal=False, renormalise=False, dropout=0.0, num_heads=0):
    """x (n, d_in) or (b, n, d_in) -> (out, cache); num_heads > 0: multi-head (needs a batch)."""
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    d_out = W_query.shape[1]
    if num_heads:
        b, n, _ = x.shape
        hd = d_out // num_heads
        queries, keys, values = (t.reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3) for t in (queries, keys, values))
    n = x.shape[-2]
    scale = 1 / np.sqrt(keys.shape[-1])
    attn_scores = queries @ swap(keys)
    above = np.triu(np.ones((n, n), dtype=bool), k=1)
    full_weights = tril = row_sum = None
    if causal and not renormalise:
        attn_weights = softmax(np.where(above, -np.inf, attn_scores) * scale)
    elif causal:  # section 3.5.1: softmax, zero the future, renormalise
        full_weights = softmax(attn_scores * scale)
        tril = (~above).astype(x.dtype)
        masked = full_weights * tril
        row_sum = masked.sum(axis=-1, keepdims=True)
        attn_weights = masked / row_sum
    else:
        attn_weights = softmax(attn_scores * scale)
    keep = None
    dropped = attn_weights
    if dropout > 0:
        keep = np.random.rand(*attn_weights.shape) >= dropout
        dropped = attn_weights * keep / (1 - dropout)
    out = dropped @ values
    if num_heads:
        out = out.transpose(0, 2, 1, 3).reshape(x.shape[0], n, d_out)
    cache = SimpleNamespace(**locals())  # everything the backward needs, by name
    return out, cache


def backward(d_out, cache, bug=None):
    """-> (dx, dW_query, dW_key, dW_value)."""
    c = cache
    x, W_query, W_key, W_value, scale = c.x, c.W_query, c.W_key, c.W_value, c.scale
    queries, keys, values, attn_scores, attn_weights = c.queries, c.keys, c.values, c.attn_scores, c.attn_weights
    dropped, full_weights, tril, row_sum = c.dropped, c.full_weights, c.tril, c.row_sum
    keep, dropout, num_heads = c.keep, c.dropout, c.num_heads
    width = W_query.shape[1]
    if num_heads:
        b, n, _ = x.shape
        d_out = d_out.reshape(b, n, num_heads, width // num_heads).transpose(0, 2, 1, 3)
    # out = dropped @ values
    d_dropped = d_out @ swap(values)
    d_values = swap(dropped) @ d_out
    if bug == "context_backward_wrong_weights":
        d_values = swap(attn_scores) @ d_out  # MISTAKE: the scores, not the weights
    # dropped = attn_weights * keep / (1 - p)
    d_weights = d_dropped
    if keep is not None:
        d_weights = d_dropped * keep / (1 - dropout)
        if bug == "dropout_backward_scale":
            d_weights = d_dropped * keep / dropout  # MISTAKE: 1/p
    softmax_out = attn_weights
    if tril is not None:
        # attn_weights = masked / row_sum, masked = full_weights * tril
        d_masked = (d_weights - np.sum(d_weights * attn_weights, axis=-1, keepdims=True)) / row_sum
        d_weights = d_masked * tril
        if bug == "mask_backward_not_zeroed":
            d_weights = d_masked  # MISTAKE: the masked positions keep their gradient
        softmax_out = full_weights
    # attn_weights = softmax(attn_scores * scale)
    A, dA = softmax_out, d_weights
    if bug == "scale_by_d_out_not_head_dim":
        scale = 1 / np.sqrt(width)  # MISTAKE: d_out, not head_dim
    d_scores = scale * A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    if bug == "softmax_backward_no_rowsum":
        d_scores = scale * A * dA  # MISTAKE
    elif bug == "softmax_backward_diagonal":
        d_scores = scale * A * (1 - A) * dA  # MISTAKE
    elif bug == "softmax_backward_identity":
        d_scores = scale * dA  # MISTAKE
    elif bug == "softmax_backward_missing_scale":
        d_scores = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))  # MISTAKE
    elif bug == "softmax_backward_wrong_axis":
        d_scores = scale * A * (dA - np.sum(dA * A, axis=-2, keepdims=True))  # MISTAKE
    # attn_scores = queries @ keys^T
    d_queries = d_scores @ keys
    d_keys = swap(d_scores) @ queries
    if bug == "scores_backward_no_transpose":
        d_keys = d_scores @ queries  # MISTAKE
    grads = [d_queries, d_keys, d_values]
    if num_heads:
        shape = (x.shape[0], x.shape[1], width)
        grads = [g.transpose(0, 2, 1, 3).reshape(shape) for g in grads]
        if bug == "head_split_no_transpose":
            grads = [g.reshape(shape) for g in (d_queries, d_keys, d_values)]  # MISTAKE
    d_queries, d_keys, d_values = grads
    # queries = x @ W_query (likewise keys, values)
    flat_x = x.reshape(-1, x.shape[-1])
    dWs = [flat_x.T @ g.reshape(-1, width) for g in grads]
    if bug == "dW_transposed":
        dWs = [(g.reshape(-1, width).T @ flat_x).reshape(W_query.shape) for g in grads]  # MISTAKE
    dx = d_queries @ W_query.T + d_keys @ W_key.T + d_values @ W_value.T
    if bug == "dx_missing_path":
        dx = d_queries @ W_query.T + d_keys @ W_key.T  # MISTAKE: the value path
    if bug == "grad_doubled":
        return 2 * dx, 2 * dWs[0], 2 * dWs[1], 2 * dWs[2]  # MISTAKE
    return dx, dWs[0], dWs[1], dWs[2]


# ---------------------------------------------------------------------------------------------- function pairs


def attention_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def attention_backward(d_out, cache):
    return backward(d_out, cache)


def _pair(bug):
    def bug_backward(d_out, cache):
        return backward(d_out, cache, bug)

    return attention_forward, bug_backward


for _bug in BUGS:
    globals()[f"{_bug}_forward"], globals()[f"{_bug}_backward"] = _pair(_bug)


def nan_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def nan_backward(d_out, cache):
    dx, dWq, dWk, dWv = backward(d_out, cache)
    return dx, dWq * np.nan, dWk, dWv  # every entry NaN


def unknown_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def unknown_backward(d_out, cache):
    dx, dWq, dWk, dWv = backward(d_out, cache)
    return dx, dWq, dWk * 1.5, dWv  # off by half, in one tensor: not a catalogued mistake


def wrong_shape_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def wrong_shape_backward(d_out, cache):
    dx, dWq, dWk, dWv = backward(d_out, cache)
    return dx, dWq.T, dWk, dWv


def raises_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def raises_backward(d_out, cache):
    raise IndexError("tuple index out of range")


# ---------------------------------------------------------------------------------------------- classes


class Attention:
    """SelfAttention_v1 with (d_in, d_out) weights and a backward that returns all four gradients."""

    bug = None

    def __init__(self, d_in, d_out):
        rng = np.random.default_rng(0)
        self.W_query = rng.random((d_in, d_out))
        self.W_key = rng.random((d_in, d_out))
        self.W_value = rng.random((d_in, d_out))

    def forward(self, x):
        out, self.cache = forward(x, self.W_query, self.W_key, self.W_value)
        return out

    __call__ = forward

    def backward(self, d_out):
        return backward(d_out, self.cache, self.bug)


class AttentionAttributes(Attention):
    """backward returns dx and keeps the weight gradients in attributes dW_query, dW_key, dW_value."""

    def backward(self, d_out):
        dx, self.dW_query, self.dW_key, self.dW_value = backward(d_out, self.cache, self.bug)
        return dx


class Causal(Attention):
    """The book's CausalAttention(d_in, d_out, context_length, dropout), mask as -inf before the softmax."""

    renormalise = False

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out)
        self.mask = np.triu(np.ones((context_length, context_length), dtype=bool), k=1)
        self.dropout = dropout

    def forward(self, x):
        out, self.cache = forward(
            x,
            self.W_query,
            self.W_key,
            self.W_value,
            causal=True,
            renormalise=self.renormalise,
            dropout=self.dropout,
        )
        return out

    __call__ = forward


class CausalRenormalised(Causal):
    """Section 3.5.1: softmax first, then the lower-triangular mask and renormalised rows."""

    renormalise = True


class MultiHead(Attention):
    """The book's MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads), no out_proj."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out)
        self.mask = np.triu(np.ones((context_length, context_length), dtype=bool), k=1)
        self.dropout = dropout
        self.num_heads = num_heads

    def forward(self, x):
        out, self.cache = forward(
            x, self.W_query, self.W_key, self.W_value, causal=True, dropout=self.dropout, num_heads=self.num_heads
        )
        return out

    __call__ = forward


for _base in (Attention, AttentionAttributes, Causal, CausalRenormalised, MultiHead):
    _bugs = BUGS + {Causal: CAUSAL_BUGS[1:], CausalRenormalised: CAUSAL_BUGS}.get(_base, ())
    _bugs += MULTIHEAD_BUGS + CAUSAL_BUGS[1:] if _base is MultiHead else ()
    for _bug in _bugs:
        globals()[f"{_base.__name__}_{_bug}"] = type(f"{_base.__name__}_{_bug}", (_base,), {"bug": _bug})


class AttentionParameters(Attention):
    """Weights held in npattn Parameters; backward returns dx and accumulates into their .grad."""

    def __init__(self, d_in, d_out):
        import npattn

        super().__init__(d_in, d_out)
        self.W_query, self.W_key, self.W_value = (npattn.Parameter(w) for w in (self.W_query, self.W_key, self.W_value))

    def forward(self, x):
        out, self.cache = forward(x, self.W_query.data, self.W_key.data, self.W_value.data)
        return out

    __call__ = forward

    def backward(self, d_out):
        dx, *dWs = backward(d_out, self.cache, self.bug)
        for W, dW in zip((self.W_query, self.W_key, self.W_value), dWs):
            W.grad += dW
        return dx


for _bug in BUGS:
    globals()[f"AttentionParameters_{_bug}"] = type(
        f"AttentionParameters_{_bug}", (AttentionParameters,), {"bug": _bug}
    )
