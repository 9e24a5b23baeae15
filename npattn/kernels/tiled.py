"""Tiled stages 2-5 in O(n) memory: FlashAttention's algorithm, in NumPy, with a hand-derived backward.

No n x m matrix is ever formed. The forward walks over key/value blocks with an online softmax
(a running row maximum mx and a running row sum l) and keeps only the output and the per-row
log-sum-exp L; the backward recomputes each block's weights from L. For one query block Q_i and key
blocks K_j, V_j (scale folded into the queries: q = scale * queries):

    forward                                             reference line it stands for
    S      = q_i K_j^T                  (bq, bk)        attn_scores * scale (one block)
    mx_new = max(mx, rowmax(S))                         softmax's row maximum, so far
    P~     = exp(S - mx_new)                            exp(z - z_max), this block
    alpha  = exp(mx - mx_new)                           rescales what was summed before
    l      = alpha * l + rowsum(P~)                     softmax's denominator, so far
    acc    = alpha * acc + P~ V_j                       context_vec * l, so far
    ... after the last block: O_i = acc / l,  L_i = mx + log(l)

    backward (G = d context_vec; D = rowsum(G * O) = rowsum(dA * A), FlashAttention's D)
    P      = exp(q_i K_j^T - L_i)                       attn_weights (one block), recomputed
    dV_j  += P^T G_i                                    d_values = A^T G
    dS     = P * (G_i V_j^T - D_i)                      softmax_backward: A * (dA - rowsum(dA * A))
    dQ_i  += scale * dS K_j,   dK_j += dS^T q_i          scores_backward (and the scale)

Row sums come out of the matrix products ([V_j, 1] gives P~ V_j and rowsum(P~) in one call), and
subtracting L_i and D_i is folded into them too ([q_i, -L_i] @ [K_j, 1]^T), so the elementwise work
per block is: max, subtract, exp (forward); exp, multiply (backward). ``causal=True`` (the book's
mask: key j > query i masked) never touches a key after a query block's last query
(``blocks.key_end``), and in a key block the diagonal crosses, skips the query rows that precede
every key of the block; it masks only what is left of the diagonal's band. Any n and m: the last
block of each axis is simply shorter. Memory: O((n + m) k) plus one (bq, bk) block of scores per
step and core.

Slabs (one head of one sequence: the leading axes) are independent. They are read in place,
strided views of the caller's arrays (heads split from (b, n, d_out) need no copy), outputs and
gradients are laid out like the inputs (``blocks.like``: the heads merge back without a copy),
and ``blocks.run_slabs`` splits them over the cores, each worker with one BLAS thread; one slab
alone runs in the calling thread with its elementwise work split by rows.
As in ``npattn.fused``, weights are kept at or above exp(flush_below) (float32 1e-31) so that none
is subnormal (``blocks.flush_below``); masked weights are exactly 0.
Dropout is not tiled: ``npattn.kernels.attention`` runs the reference path when dropout is on.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from npattn._checks import check_positive_int
from npattn.kernels.blocks import (
    RowRunner,
    augment,
    causal_fill,
    check_qkv,
    flush_below,
    key_end,
    like,
    row_dot,
    run_slabs,
    skipped_nans,
)

__all__ = ["DEFAULT_BLOCK_K", "DEFAULT_BLOCK_Q", "tiled_backward", "tiled_forward"]

DEFAULT_BLOCK_Q = 128
DEFAULT_BLOCK_K = 2048
"""Default block sizes: a (128, 2048) float32 block of scores is 1 MiB, in one core's L2 (2 MiB)."""


def _blocks(size: int, block: int) -> list[tuple[int, int]]:
    return [(a, min(a + block, size)) for a in range(0, size, block)]


def _first_row(a: int, k0: int, causal: bool) -> int:
    """First query row (from a on) that may see a key of the block starting at k0."""
    return max(a, k0) if causal else a


def _crosses(a: int, k0: int, k1: int, causal: bool) -> bool:
    """Whether the causal diagonal masks part of key block [k0, k1) for query rows from a on."""
    return causal and k1 - 1 > a


def _online_softmax_rows(S: np.ndarray, mx: np.ndarray, alpha: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1 of a block: mx <- max(mx, rowmax(S)), alpha = exp(mx_old - mx), S <- exp(S - mx)."""
    block = S[r0:r1]
    m_old = mx[r0:r1].copy()
    np.maximum(m_old, block.max(axis=1), out=mx[r0:r1])
    block -= mx[r0:r1, None]
    np.maximum(block, flush_below(block.dtype), out=block)  # no subnormal weights
    np.exp(block, out=block)
    np.exp(m_old - mx[r0:r1], out=alpha[r0:r1])


def _exp_rows(S: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1: S <- exp(max(S, flush_below)) in place (as in the forward)."""
    block = S[r0:r1]
    np.maximum(block, flush_below(block.dtype), out=block)
    np.exp(block, out=block)


def _multiply_rows(dS: np.ndarray, P: np.ndarray, r0: int, r1: int) -> None:
    np.multiply(dS[r0:r1], P[r0:r1], out=dS[r0:r1])


def tiled_forward(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    *,
    causal: bool = False,
    block_q: int = DEFAULT_BLOCK_Q,
    block_k: int = DEFAULT_BLOCK_K,
) -> tuple[np.ndarray, tuple]:
    """Stages 2 to 5 tiled: (..., n, k), (..., m, k), (..., m, kv) -> context_vec (..., n, kv).

    Keeps only O((n + m) k) for the backward: the inputs, the output and L (..., n).

    Raises:
        ShapeError, DTypeError: see ``npattn.kernels.blocks.check_qkv``.
        ConfigError: block_q or block_k not a positive integer.
    """
    check_qkv(queries, keys, values)
    block_q = check_positive_int(block_q, "block_q")
    block_k = check_positive_int(block_k, "block_k")
    n, m, kv = queries.shape[-2], keys.shape[-2], values.shape[-1]
    scale = 1.0 / math.sqrt(keys.shape[-1])
    q = queries * queries.dtype.type(scale)
    v_aug = augment(values, 1.0)
    dtype = q.dtype
    out = like(queries, kv)  # laid out like queries: heads merge back without a copy
    L = np.empty(queries.shape[:-1], dtype=dtype)

    def forward_slab(s: tuple, rows: RowRunner) -> None:
        """One (n, k) slab (one head of one sequence): out[s] and L[s]."""
        for a, e in _blocks(n, block_q):
            mx = np.full(e - a, -np.inf, dtype=dtype)
            alpha = np.empty(e - a, dtype=dtype)
            acc = np.zeros((e - a, kv + 1), dtype=dtype)  # [alpha-rescaled P~ V, l]
            for k0, k1 in _blocks(key_end(e, m, causal), block_k):
                r = _first_row(a, k0, causal)  # rows a .. r - 1 see no key of this block
                S = q[s][r:e] @ keys[s][k0:k1].T
                if _crosses(r, k0, k1, causal):
                    causal_fill(S, r, k0, -np.inf)
                rows(partial(_online_softmax_rows, S, mx[r - a :], alpha[r - a :]), e - r, k1 - k0)
                if _crosses(r, k0, k1, causal):
                    causal_fill(S, r, k0, 0.0)  # masked weights exactly 0
                acc[r - a :] *= alpha[r - a :, None]
                acc[r - a :] += S @ v_aug[s][k0:k1]
            l = acc[:, kv]
            np.divide(acc[:, :kv], l[:, None], out=out[s][a:e])
            L[s][a:e] = mx + np.log(l)

    run_slabs(forward_slab, list(np.ndindex(*queries.shape[:-2])), n * m)
    skipped_nans(out, values, causal)  # a NaN value spoils its column in every row, as in the reference
    return out, (q, keys, v_aug, out, L, scale, causal, block_q, block_k)


def tiled_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values), recomputing each block's weights from L."""
    # forward: context_vec = softmax(q k^T) v, block by block; L = rowmax + log(rowsum)
    q, k, v_aug, out, L, scale, causal, block_q, block_k = cache
    n, m, kv = out.shape[-2], k.shape[-2], out.shape[-1]
    G = d_context_vec.astype(q.dtype, copy=False)
    D = row_dot(G, out)  # rowsum(G * O) = rowsum(dA * A)
    q_L = augment(q, -L)  # [q, -L] @ [k, 1]^T = q k^T - L
    k_1 = augment(k, 1.0)
    G_D = augment(G, -D)  # [G, -D] @ [v, 1]^T = G v^T - D
    d_queries, d_keys, d_values = like(q, q.shape[-1]), like(k, k.shape[-1]), like(k, kv)
    for grad in (d_queries, d_keys, d_values):
        grad.fill(0.0)

    def backward_slab(s: tuple, rows: RowRunner) -> None:
        """One slab's d_queries[s], d_keys[s], d_values[s]."""
        for a, e in _blocks(n, block_q):
            for k0, k1 in _blocks(key_end(e, m, causal), block_k):
                r = _first_row(a, k0, causal)
                P = q_L[s][r:e] @ k_1[s][k0:k1].T  # scores - L
                rows(partial(_exp_rows, P), e - r, k1 - k0)
                if _crosses(r, k0, k1, causal):
                    causal_fill(P, r, k0, 0.0)  # masked weights exactly 0
                d_values[s][k0:k1] += P.T @ G[s][r:e]
                dS = G_D[s][r:e] @ v_aug[s][k0:k1].T  # dA - D
                rows(partial(_multiply_rows, dS, P), e - r, k1 - k0)
                d_queries[s][r:e] += dS @ k[s][k0:k1]
                d_keys[s][k0:k1] += dS.T @ q[s][r:e]

    run_slabs(backward_slab, list(np.ndindex(*q.shape[:-2])), n * m)
    d_queries *= d_queries.dtype.type(scale)
    return d_queries, d_keys, d_values
