"""float64 attention that is right on its first call only, a backward right on its first call only,
and a float64 backward with a small bug:
``npattn check`` must fail each (tests/debug/test_check_stale.py, test_backcheck_second_call.py)."""

import numpy as np


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _forward(x, Wq, Wk, Wv, weights=None):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    a = _softmax(q @ k.T / np.sqrt(k.shape[-1])) if weights is None else weights
    return a @ v, (x, Wq, Wk, Wv, q, k, v, a)


def _backward(d, c):
    x, Wq, Wk, Wv, q, k, v, a = c
    da, dv = d @ v.T, a.T @ d
    ds = a * (da - (da * a).sum(-1, keepdims=True)) / np.sqrt(k.shape[-1])
    dq, dk = ds @ k, ds.T @ q
    return dq @ Wq.T + dk @ Wk.T + dv @ Wv.T, x.T @ dq, x.T @ dk, x.T @ dv


class StaleWeights:
    """Attention weights computed on the first forward and reused for every later input."""

    def __init__(self, d_in, d_out):
        self.W_query = self.W_key = self.W_value = np.zeros((d_in, d_out))
        self.a = None

    def forward(self, x):
        out, self.c = _forward(np.asarray(x, np.float64), self.W_query, self.W_key, self.W_value, self.a)
        self.a = self.c[-1]
        return out

    def backward(self, d):
        return _backward(np.asarray(d, np.float64), self.c)


_memo = {}


def memo_forward(x, W_query, W_key, W_value):
    """The output of the first input of each shape, for every later input of that shape."""
    return _memo.setdefault(x.shape, _forward(x, W_query, W_key, W_value))


def memo_backward(d_out, cache):
    return _backward(d_out, cache)


def off_forward(x, W_query, W_key, W_value):
    return _forward(x, W_query, W_key, W_value)


def off_backward(d_out, cache):
    """dW_key off by 5e-5 relative, in float64: finite differences of the forward see it."""
    dx, dW_query, dW_key, dW_value = _backward(d_out, cache)
    return dx, dW_query, dW_key * (1 + 5e-5), dW_value


class Fresh:
    """Right attention and backward: a new cache on every forward, this call's gradients only."""

    def __init__(self, d_in, d_out):
        self.W_query = self.W_key = self.W_value = np.zeros((d_in, d_out))

    def forward(self, x):
        out, self.c = _forward(np.asarray(x, np.float64), self.W_query, self.W_key, self.W_value)
        return out

    def backward(self, d):
        return _backward(np.asarray(d, np.float64), self.c)


class StaleCache(Fresh):
    """The first forward's cache kept for every later backward (the output itself is right)."""

    def forward(self, x):
        out, c = _forward(np.asarray(x, np.float64), self.W_query, self.W_key, self.W_value)
        self.c = getattr(self, "c", c)
        return out


class RunningSum(Fresh):
    """The weight gradients returned as a running sum over every backward, never reset."""

    def backward(self, d):
        dx, *dW = super().backward(d)
        self.total = [t + g for t, g in zip(getattr(self, "total", [0.0, 0.0, 0.0]), dW)]
        return (dx, *self.total)
