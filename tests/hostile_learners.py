"""User code that tries to fool ``npattn check``: each returns something a careless check would pass
or crash on. Loaded by tests/debug/test_check_hostile.py (see tests/learners.py for the honest ones)."""

import numpy as np
from learners import Attention, AttentionAttributes, backward, forward


class ForwardOnly:
    """A forward and a backward, no __call__ (the book's classes have a forward)."""

    def __init__(self, d_in, d_out):
        self.W_query, self.W_key, self.W_value = (np.zeros((d_in, d_out)) for _ in range(3))

    def forward(self, x):
        out, self.cache = forward(x, self.W_query, self.W_key, self.W_value)
        return out

    def backward(self, d_out):
        return backward(d_out, self.cache)


def _returning(make):
    """A (forward, backward) pair whose backward returns make(dx, dW_query, dW_key, dW_value)."""

    def pair_backward(d_out, cache):
        return make(*backward(d_out, cache))

    return forward, pair_backward


class _RaisingArray:
    def __array__(self, *args, **kwargs):
        raise RuntimeError("no array for you")


RETURNS = {
    "complex": lambda dx, dWq, dWk, dWv: (dx, dWq + 1j, dWk, dWv),  # the imaginary part is not noise
    "strings": lambda dx, dWq, dWk, dWv: (dx, dWq.astype(str), dWk, dWv),
    "letters": lambda *grads: ("a", "b", "c", "d"),
    "raising_array": lambda dx, dWq, dWk, dWv: (dx, _RaisingArray(), dWk, dWv),
    "ragged": lambda dx, dWq, dWk, dWv: (dx, [[1.0, 2.0], [3.0]], dWk, dWv),
    "objects": lambda dx, dWq, dWk, dWv: (dx, np.array([[object()] * 2] * 3), dWk, dWv),
    "booleans": lambda dx, dWq, dWk, dWv: (dx, dWq > 0, dWk, dWv),
    "lists": lambda dx, dWq, dWk, dWv: (dx.tolist(), dWq.tolist(), dWk.tolist(), dWv.tolist()),  # fine
}
for _name, _make in RETURNS.items():
    globals()[f"{_name}_forward"], globals()[f"{_name}_backward"] = _returning(_make)


# NAME and the pair NAME_forward/NAME_backward in one file: the pair's backward is wrong.
def both(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)[0]


def both_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def both_backward(d_out, cache):
    return backward(d_out, cache, "grad_doubled")


def float32_forward(x, W_query, W_key, W_value):
    """Right, but computed in float32: finite differences of it are rounding noise."""
    out, cache = forward(*(a.astype(np.float32) for a in (x, W_query, W_key, W_value)))
    return out.astype(np.float32), cache


def float32_backward(d_out, cache):
    return tuple(g.astype(np.float64) for g in backward(d_out.astype(np.float32), cache))


def float32_inside_forward(x, W_query, W_key, W_value):
    """Computed in float32 but returned as float64: the dtype does not tell."""
    out, cache = float32_forward(x, W_query, W_key, W_value)
    return out.astype(np.float64), cache


float32_inside_backward = float32_backward


def float32_wrong_forward(x, W_query, W_key, W_value):
    return float32_forward(x, W_query, W_key, W_value)


def float32_wrong_backward(d_out, cache):
    return tuple(g.astype(np.float64) for g in backward(d_out.astype(np.float32), cache, "grad_doubled"))


class Accumulating(AttentionAttributes):
    """Gradients accumulated into arrays made in __init__, like a learner's zero_grad design."""

    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        self.dW_query, self.dW_key, self.dW_value = (np.zeros((d_in, d_out)) for _ in range(3))

    def backward(self, d_out):
        dx, dWq, dWk, dWv = backward(d_out, self.cache, self.bug)
        self.dW_query += dWq
        self.dW_key += dWk
        self.dW_value += dWv
        return dx


class Accumulating_grad_doubled(Accumulating):
    bug = "grad_doubled"


class CausalBadDropout(Attention):
    """Right without dropout; with dropout, the kept weights are not rescaled by 1/(1 - p)."""

    def __init__(self, d_in, d_out, context_length, dropout):
        super().__init__(d_in, d_out)
        self.mask = np.triu(np.ones((context_length, context_length), dtype=bool), k=1)
        self.dropout = dropout

    def forward(self, x):
        out, self.cache = forward(x, self.W_query, self.W_key, self.W_value, causal=True, dropout=self.dropout)
        if self.dropout:
            out = out * (1 - self.dropout)  # undoes the 1/(1 - p)
        return out

    __call__ = forward


def subtle_forward(x, W_query, W_key, W_value):
    return forward(x, W_query, W_key, W_value)


def subtle_backward(d_out, cache):
    """Off by 1e-5 relative in one tensor, in float64: a bug, not float noise."""
    dx, dWq, dWk, dWv = backward(d_out, cache)
    return dx, dWq, dWk * (1 + 1e-5), dWv


class _MultiHead:
    """The book's MultiHeadAttention in NumPy, with an output projection (a (d_out, d_out) array)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        rng = np.random.default_rng(0)
        self.W_query, self.W_key, self.W_value = (rng.random((d_in, d_out)) for _ in range(3))
        self.out_proj = rng.random((d_out, d_out))
        self.num_heads, self.dropout = num_heads, dropout

    def forward(self, x):
        merged, self.cache = forward(
            x, self.W_query, self.W_key, self.W_value, causal=True, dropout=self.dropout, num_heads=self.num_heads
        )
        return merged @ self.out_proj

    def backward(self, d_out):
        return backward(d_out @ self.out_proj.T, self.cache)


class MultiHeadOutProj(_MultiHead):
    pass


class MultiHeadOutProjFunction(_MultiHead):
    """out_proj a function: nothing npattn check can set to the identity."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__(d_in, d_out, context_length, dropout, num_heads)
        self.out_proj = lambda t: 2.0 * t

    def forward(self, x):
        merged, self.cache = forward(x, self.W_query, self.W_key, self.W_value, causal=True, num_heads=self.num_heads)
        return self.out_proj(merged)


def nan_output(x, W_query, W_key, W_value):
    return np.full((x.shape[0], W_query.shape[1]), np.nan)
