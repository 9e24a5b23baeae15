"""Fused stages 2-5: the same math as ``functional.attention_forward``, with far fewer passes.

On this kind of machine a pass over an n x n matrix in memory costs about as much as a matrix
product with k = 64, so the fused path keeps one n x m buffer (E) from forward to backward, does
each direction's elementwise work in one pass over it (on cache-sized row blocks), and lets the
matrix products do the rest (row sums and the D subtraction ride along as an extra column):

    forward                                          reference line it replaces
    E      = (scale q) @ k^T                         attn_scores * scale
    E      = exp(E - rowmax(E))  (one pass, in place) softmax's numerator
    [Z, l] = E @ [v, 1]          Z = E v, l = rowsum(E)   softmax's denominator; context_vec * l
    context_vec = Z / l                              attn_weights = E / l, context_vec = A v

    backward (G = d context_vec; D = rowsum(G * context_vec) = rowsum(dA * A), FlashAttention's D)
    dV   = E^T @ (G / l)                             d_values = A^T G
    dS   = [G / l, -D / l] @ [v, 1]^T  = (dA - D) / l      d_attn_weights - row_dot, over l
    dS  *= E                     (one pass, in place) = A * (dA - D): softmax_backward
    dS[max] = 0 on rows with l == 1 (one-hot in the dtype: the reference's value there, where
                 D from context_vec leaves a rounding residue; blocks.zero_saturated_maxima)
    d_queries = scale * dS @ k,  d_keys = dS^T @ (scale q)      scores_backward and the scale

The weights are never normalised in the n x m buffer: dividing by l is done on the (n, kv) side
of each product instead. The elementwise passes run on the rows split over the cores
(``npattn.kernels.blocks.run_rows``); the matrix products run in the calling thread (BLAS threads its
own). Causal masking (``causal=True``: the book's mask, key j > query i masked) splits the query rows
into CAUSAL_BLOCKS row blocks, each multiplied only with the keys up to its last query (the
products skip nearly half of the n x m work), and sets masked scores to -inf before the row
maximum, so E is exactly 0 there and so is every gradient through it.
Weights under exp(flush_below) (float32 1e-31, float64 1e-292) are raised to it rather than left
subnormal (``npattn.kernels.blocks.flush_below``: subnormal arithmetic is many times slower on x86).
Results equal ``attention_forward`` / ``attention_backward`` to rounding (1e-12 in float64).
Dropout is not fused: ``npattn.kernels.attention`` runs the reference path when dropout is on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from npattn.kernels.blocks import (
    T,
    augment,
    causal_fill,
    check_qkv,
    flat,
    flush_below,
    key_end,
    row_dot,
    run_rows,
    skipped_nans,
    zero_saturated_maxima,
)

__all__ = ["fused_backward", "fused_forward"]


CACHE_ELEMENTS = 1 << 15
"""Elements per row block of the forward pass (128 KiB in float32): max, subtract, exp in L2."""
MIN_BLOCK_ROWS = 16
"""At least this many rows per block, so that long rows do not cost one Python step per row."""
CAUSAL_BLOCKS = 8
"""Causal: the query rows in this many blocks, each multiplied with the keys it may see only."""


def _exp_rows(E: np.ndarray, r0: int, r1: int, row0: int, causal: bool) -> None:
    """Rows r0:r1 of a (rows, keys) window of one slab's scores whose first row is query row0:
    E <- exp(max(E - rowmax(E), flush_below)) in place; masked entries -> exactly 0 (see
    ``npattn.kernels.blocks.flush_below``)."""
    step = max(MIN_BLOCK_ROWS, CACHE_ELEMENTS // max(1, E.shape[1]))
    cut = flush_below(E.dtype)
    for a in range(r0, r1, step):
        block = E[a : min(a + step, r1)]
        if causal:  # keys from row0 + a + rows on follow every query of the block: weight 0
            stop = row0 + a + block.shape[0]
            block[:, stop:] = 0.0
            block = block[:, :stop]
            causal_fill(block, row0 + a, 0, -np.inf)
        block -= block.max(axis=1, keepdims=True)
        np.maximum(block, cut, out=block)  # no subnormal weights
        np.exp(block, out=block)
        if causal:
            causal_fill(block, row0 + a, 0, 0.0)


def _multiply_rows(dS: np.ndarray, E: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1 of one slab: dS <- dS * E in place."""
    np.multiply(dS[r0:r1], E[r0:r1], out=dS[r0:r1])


def _exp_slab_rows(E: np.ndarray, row0: int, causal: bool, b: int, r0: int, r1: int) -> None:
    _exp_rows(E[b], r0, r1, row0, causal)


def _multiply_slab_rows(dS: np.ndarray, E: np.ndarray, b: int, r0: int, r1: int) -> None:
    _multiply_rows(dS[b], E[b], r0, r1)


def _each_slab_rows(fn: Callable[[int, int, int], None], B: int, n: int, m: int) -> None:
    """Run ``fn(b, r0, r1)`` over every slab b, its rows split over the cores."""
    for b in range(B):
        run_rows(partial(fn, b), n, m)


def _row_blocks(n: int, causal: bool) -> list[tuple[int, int]]:
    """Query row blocks [a, e): all n rows at once, or (causal) CAUSAL_BLOCKS blocks, each of
    which needs only keys 0 .. e - 1 (``blocks.key_end``): the products skip (CAUSAL_BLOCKS - 1)
    / (2 CAUSAL_BLOCKS) of the n x n work that lies above the diagonal."""
    if not causal:
        return [(0, n)]
    size = max(MIN_BLOCK_ROWS, -(-n // CAUSAL_BLOCKS))
    return [(a, min(a + size, n)) for a in range(0, n, size)]


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
    k, v_aug = flat(keys), flat(augment(values, 1.0))
    B = q.shape[0]
    E = np.empty((B, n, m), dtype=q.dtype)  # unnormalised weights; causal: only [a:e, :e] is written
    Z_l = np.empty((B, n, kv + 1), dtype=q.dtype)
    for a, e in _row_blocks(n, causal):
        end = key_end(e, m, causal)
        E_block = E[:, a:e, :end]
        np.matmul(q[:, a:e], T(k[:, :end]), out=E_block)  # scaled scores
        _each_slab_rows(partial(_exp_slab_rows, E_block, a, causal), B, e - a, end)
        np.matmul(E_block, v_aug[:, :end], out=Z_l[:, a:e])  # [E v, rowsum(E)]
    l_inv = np.reciprocal(Z_l[..., kv:])  # (B, n, 1)
    out = np.multiply(Z_l[..., :kv], l_inv)
    skipped_nans(out, v_aug[..., :kv], causal)  # a NaN value spoils its column in every row, as in the reference
    context_vec = out.reshape(*lead, n, kv)
    return context_vec, (q, k, v_aug, E, l_inv, out, scale, causal)


def fused_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values), shaped like the forward's inputs."""
    # forward: E = exp(scale q k^T - rowmax); context_vec = (E @ v) / l
    q, k, v_aug, E, l_inv, out, scale, causal = cache
    lead = d_context_vec.shape[:-2]
    B, n, m = E.shape
    kv = v_aug.shape[-1] - 1  # explicit widths below: reshape(-1, ...) is ambiguous for kv = 0
    G_l = np.reshape(d_context_vec, (B, n, kv)).astype(E.dtype, copy=False) * l_inv  # G / l, (B, n, kv)
    D_l = row_dot(G_l, out)  # rowsum(G * context_vec) / l = rowsum(dA * A) / l
    G_D = augment(G_l, -D_l)
    d_queries = np.empty_like(q)
    d_keys = np.zeros_like(k)
    d_values = np.zeros_like(v_aug[..., :-1])
    for a, e in _row_blocks(n, causal):
        end = key_end(e, m, causal)
        E_block = E[:, a:e, :end]
        d_values[:, :end] += np.matmul(T(E_block), G_l[:, a:e])  # A^T G = E^T (G / l)
        dS = np.matmul(G_D[:, a:e], T(v_aug[:, :end]))  # (dA - D) / l
        _each_slab_rows(partial(_multiply_slab_rows, dS, E_block), B, e - a, end)
        # dS = A * (dA - D): the gradient w.r.t. the scaled scores (scale q) k^T.
        zero_saturated_maxima(dS, E_block, l_inv[:, a:e, 0] == 1)  # rows with l == 1: one-hot
        np.matmul(dS, k[:, :end], out=d_queries[:, a:e])
        d_keys[:, :end] += np.matmul(T(dS), q[:, a:e])
    d_queries *= d_queries.dtype.type(scale)
    return (
        d_queries.reshape(*lead, n, q.shape[-1]),
        d_keys.reshape(*lead, m, k.shape[-1]),
        d_values.reshape(*lead, m, kv),
    )
