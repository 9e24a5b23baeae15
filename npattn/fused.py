"""Fused stages 2-5: the same math as ``functional.attention_forward``, with far fewer passes.

On this kind of machine an n x n pass over memory costs about as much as a matrix product with
k = 64, so the fused path does the softmax's elementwise work inside the matrix products where it
can, and keeps one n x m buffer (E) between forward and backward:

    forward                                          reference line it replaces
    c     = |scale q_i| * max_j |k_j|   (>= every score of row i, Cauchy-Schwarz)
    E     = [scale q, -c] @ [k, 1]^T    = scale q k^T - c          attn_scores * scale - rowmax
    E     = exp(E)                      (in place; the only elementwise pass)
    [Z, l] = E @ [v, 1]                 Z = E v, l = rowsum(E)      softmax's sum, context_vec
    context_vec = Z / l                                              attn_weights = E / l

    backward (G = d context_vec; D = rowsum(G * context_vec) = rowsum(dA * A), FlashAttention's D)
    dV    = E^T @ (G / l)                                            d_values = A^T G
    dS    = [G / l, -D / l] @ [v, 1]^T  = (dA - D) / l               d_attn_weights - row_dot
    dS   *= E                           (in place; the only elementwise pass) = A * (dA - D)
    d_queries = scale * dS @ k,  d_keys = dS^T @ (scale q)           scores_backward, scale

The row bound c replaces the row maximum only to keep exp from overflowing; softmax is invariant to
it. A row whose bound is so loose that its sum l falls below ``tiny`` (float32: 3e-10, i.e. the
bound exceeds the true maximum by more than ~20) is recomputed with the exact maximum, so no row
underflows. The one elementwise pass per direction runs on the rows split over the cores
(``npattn._parallel``); the matrix products run in the calling thread (BLAS threads its own).
Causal masking (``causal=True``: the book's mask, key j > query i masked) sets masked entries of E
to -inf before the exponential, so E is exactly 0 there and so is every gradient through it.
Results equal ``attention_forward`` / ``attention_backward`` to rounding (1e-12 in float64).
Dropout is not fused: ``npattn.kernels.attention`` runs the reference path when dropout is on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from npattn._fastpath import T, augment, causal_fill, check_qkv, flat, row_dot, run_rows

__all__ = ["fused_backward", "fused_forward", "tiny"]


def tiny(dtype: np.dtype) -> float:
    """Smallest row sum l accepted from a bounded (not exact) row maximum: finfo.tiny ** 0.25."""
    return float(np.finfo(dtype).tiny) ** 0.25


def _exp_rows(E: np.ndarray, r0: int, r1: int, causal: bool) -> None:
    """Rows r0:r1 of one (n, m) slab: E <- exp(E) in place, masked entries -> 0."""
    block = E[r0:r1]
    if causal:
        causal_fill(block, r0, 0, -np.inf)
    np.exp(block, out=block)


def _exact_rows(q: np.ndarray, k: np.ndarray, rows: np.ndarray, causal: bool) -> np.ndarray:
    """exp(scores - rowmax) for the given rows of one slab, as in ``functional.softmax``."""
    scores = q[rows] @ k.T
    if causal:
        scores[np.arange(k.shape[0])[None, :] > rows[:, None]] = -np.inf
    scores -= scores.max(axis=1, keepdims=True)
    return np.exp(scores, out=scores)


def _multiply_rows(dS: np.ndarray, E: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1 of one slab: dS <- dS * E in place."""
    np.multiply(dS[r0:r1], E[r0:r1], out=dS[r0:r1])


def _each_slab_rows(fn: Callable[[int, int, int], None], B: int, n: int, m: int) -> None:
    """Run ``fn(b, r0, r1)`` over every slab b, its rows split over the cores."""
    for b in range(B):
        run_rows(partial(fn, b), n, m)


# ----------------------------------------------------------------------------------------------
# Stages 2-5, fused.


def fused_forward(
    queries: np.ndarray, keys: np.ndarray, values: np.ndarray, *, causal: bool = False
) -> tuple[np.ndarray, tuple]:
    """Stages 2 to 5 fused: (..., n, k), (..., m, k), (..., m, kv) -> context_vec (..., n, kv).

    Keeps one (..., n, m) buffer (the unnormalised weights E) for the backward.

    Raises:
        ShapeError, DTypeError: see ``check_qkv``.
    """
    check_qkv(queries, keys, values)
    lead = queries.shape[:-2]
    n, m, kv = queries.shape[-2], keys.shape[-2], values.shape[-1]
    scale = 1.0 / math.sqrt(keys.shape[-1])
    q = flat(queries * queries.dtype.type(scale))
    k, v = flat(keys), flat(values)
    B = q.shape[0]
    # c[b, i] >= every scaled score of row i (0 when there are no keys).
    k_max = np.sqrt(np.einsum("bjc,bjc->bj", k, k).max(axis=1, initial=0.0))
    c = np.sqrt(np.einsum("bic,bic->bi", q, q)) * k_max[:, None]
    E = np.matmul(augment(q, -c), T(augment(k, 1.0)))  # scale q k^T - c, (B, n, m)
    _each_slab_rows(lambda b, r0, r1: _exp_rows(E[b], r0, r1, causal), B, n, m)
    v_aug = augment(v, 1.0)
    Z_l = np.matmul(E, v_aug)  # [E v, rowsum(E)], (B, n, kv + 1)
    for b, i in zip(*np.nonzero(Z_l[..., kv] < tiny(E.dtype))):  # bound too loose: exact max
        E[b, i] = _exact_rows(q[b], k[b], np.array([i]), causal)[0]
        Z_l[b, i] = E[b, i] @ v_aug[b]
    l_inv = np.reciprocal(Z_l[..., kv:])  # (B, n, 1)
    out = np.multiply(Z_l[..., :kv], l_inv)
    context_vec = out.reshape(*lead, n, kv)
    return context_vec, (q, k, v_aug, E, l_inv, out, scale)


def fused_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values), shaped like the forward's inputs."""
    # forward: E = exp(scale q k^T - c); context_vec = (E @ v) / l
    q, k, v_aug, E, l_inv, out, scale = cache
    lead = d_context_vec.shape[:-2]
    B, n, m = E.shape
    G_l = flat(d_context_vec).astype(E.dtype, copy=False) * l_inv  # G / l, (B, n, kv)
    D_l = row_dot(G_l, out)  # rowsum(G * context_vec) / l = rowsum(dA * A) / l
    d_values = np.matmul(T(E), G_l)  # A^T G = E^T (G / l)
    dS = np.matmul(augment(G_l, -D_l), T(v_aug))  # (dA - D) / l, (B, n, m)
    _each_slab_rows(lambda b, r0, r1: _multiply_rows(dS[b], E[b], r0, r1), B, n, m)
    # dS = A * (dA - D): the gradient w.r.t. the scaled scores (scale q) k^T.
    d_queries = np.matmul(dS, k)
    d_queries *= d_queries.dtype.type(scale)
    d_keys = np.matmul(T(dS), q)
    return (
        d_queries.reshape(*lead, n, -1),
        d_keys.reshape(*lead, m, -1),
        d_values.reshape(*lead, m, -1),
    )
