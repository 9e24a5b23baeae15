"""Broken backward variants of the stage pairs, planted to prove that gradient checks fail.

Each has the signature of the stage backward it replaces: ``(d_output, cache) -> grads``.
"""

import numpy as np


def _T(a):
    return np.swapaxes(a, -1, -2)


def softmax_sign_flip(d_a, cache):
    a, scale = cache
    return (-scale * a * (d_a - np.sum(d_a * a, axis=-1, keepdims=True)),)


def softmax_wrong_axis(d_a, cache):
    a, scale = cache
    return (scale * a * (d_a - np.sum(d_a * a, axis=-2, keepdims=True)),)


def softmax_missing_scale(d_a, cache):
    a, _ = cache
    return (a * (d_a - np.sum(d_a * a, axis=-1, keepdims=True)),)


def softmax_scaled_by(divisor):
    """A softmax backward that divides by ``divisor`` instead of multiplying by the forward's scale."""

    def broken(d_a, cache):
        a, _ = cache
        return (a * (d_a - np.sum(d_a * a, axis=-1, keepdims=True)) / divisor,)

    return broken


def scores_dK_missing_transpose(d_s, cache):
    q, k = cache
    return d_s @ k, d_s @ q


def context_dV_missing_transpose(d_z, cache):
    a, v = cache
    return d_z @ _T(v), a @ d_z


def context_dA_reshaped_not_transposed(d_z, cache):
    a, v = cache
    return d_z @ v.reshape(_T(v).shape), _T(a) @ d_z


def plant(monkeypatch, name: str, broken) -> None:
    """Replace stage function ``name`` everywhere it is looked up: in ``npattn.nn.functional`` (what
    the modules and kernels call) and in the file that defines it (what its own pipeline calls)."""
    import sys

    from npattn.nn import functional as F

    home = sys.modules[getattr(F, name).__module__]
    monkeypatch.setattr(F, name, broken)
    monkeypatch.setattr(home, name, broken)
