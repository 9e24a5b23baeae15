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
    dS[max] = 0 on rows with l == 1                     one-hot rows: the reference's value there
    dQ_i  += scale * dS K_j,   dK_j += dS^T q_i          scores_backward (and the scale)

Row sums come out of the matrix products ([V_j, 1] gives P~ V_j and rowsum(P~) in one call), and
subtracting L_i and D_i is folded into them too ([q_i, -L_i] @ [K_j, 1]^T), so the elementwise work
per block is: max, subtract, floor, exp (forward); floor, exp, multiply (backward).
``causal=True`` (the book's mask: key j > query i masked) never touches a key after a query
block's last query (``blocks.key_end``), and in a key block the diagonal crosses, skips the query
rows that precede every key of the block; it masks only the diagonal's band
(``blocks.causal_band``). Any n and m: the last block of each axis is simply shorter. Memory:
O((n + m) k) plus one (bq, bk) block of scores per slab of a step and core.

Slabs (one head of one sequence: the leading axes) are independent. They are read in place,
strided views of the caller's arrays (heads split from (b, n, d_out) need no copy), outputs and
gradients are laid out like the inputs (``blocks.like``: the heads merge back without a copy).
Each step works on a group of slabs side by side (several heads of one sequence: batched
products and elementwise passes over a (g, bq, bk) block, ``GROUP_BYTES``), so one Python call
does the work of several heads; ``blocks.run_slabs`` splits the groups over the cores, each
worker with one BLAS thread; one group alone runs in the calling thread with its elementwise
work split by rows.
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
    T,
    augment,
    causal_band,
    check_qkv,
    flush_below,
    key_end,
    like,
    num_workers,
    row_dot,
    run_slabs,
    skipped_nans,
    zero_saturated_maxima,
)

__all__ = ["DEFAULT_BLOCK_K", "DEFAULT_BLOCK_Q", "tiled_backward", "tiled_forward"]

DEFAULT_BLOCK_Q = 128
DEFAULT_BLOCK_K = 2048
"""Default block sizes: a (128, 2048) float32 block of scores is 1 MiB, in one core's L2 (2 MiB)."""
GROUP_BYTES = 2**20
"""Slabs (heads) side by side in one step's batched products and elementwise passes: as many as
keep their blocks of scores within this many bytes (one Python call then does the work of
several heads; at n = 1024, float32, two heads)."""


def _blocks(size: int, block: int) -> list[tuple[int, int]]:
    return [(a, min(a + block, size)) for a in range(0, size, block)]


def _first_row(a: int, k0: int, causal: bool) -> int:
    """First query row (from a on) that may see a key of the block starting at k0."""
    return max(a, k0) if causal else a


def _crosses(a: int, k0: int, k1: int, causal: bool) -> bool:
    """Whether the causal diagonal masks part of key block [k0, k1) for query rows from a on."""
    return causal and k1 - 1 > a


def _groups(lead: tuple[int, ...], per_group: int) -> list[tuple]:
    """Index tuples over the leading axes ``lead`` (at least one), the last one a slice of at
    most ``per_group`` slabs: each indexes a (g, n, k) stack of slabs."""
    last = lead[-1]
    cuts = [slice(j, min(j + per_group, last)) for j in range(0, last, per_group)]
    return [(*idx, cut) for idx in np.ndindex(*lead[:-1]) for cut in cuts]


def _per_group(lead: tuple[int, ...], block_elements: int, itemsize: int) -> int:
    """How many slabs one Python-level step handles: as many as keep a block of scores of all of
    them within GROUP_BYTES, but no fewer groups than cores (``blocks.num_workers``)."""
    fit = max(1, GROUP_BYTES // max(1, block_elements * itemsize))
    count = math.prod(lead)
    spread = max(1, math.ceil(count / num_workers()))  # every core gets a group
    return min(fit, spread, lead[-1])


def _online_softmax_rows(S: np.ndarray, mx: np.ndarray, alpha: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1 of a (g, rows, cols) block: mx <- max(mx, rowmax(S)), alpha = exp(mx_old - mx),
    S <- exp(S - mx)."""
    block = S[:, r0:r1]
    m_old = mx[:, r0:r1].copy()
    np.maximum(m_old, block.max(axis=2), out=mx[:, r0:r1])
    block -= mx[:, r0:r1, None]
    np.maximum(block, flush_below(block.dtype), out=block)  # no subnormal weights
    np.exp(block, out=block)
    np.exp(m_old - mx[:, r0:r1], out=alpha[:, r0:r1])


def _exp_rows(S: np.ndarray, r0: int, r1: int) -> None:
    """Rows r0:r1 of a (g, rows, cols) block of scores - L: S <- exp(clip(S, flush_below, 0)) in
    place. Unmasked entries are <= 0 (L is the row's log-sum-exp) but for rounding; the masked band,
    zeroed next, can be far above 0 and would overflow exp."""
    block = S[:, r0:r1]
    np.clip(block, flush_below(block.dtype), 0.0, out=block)
    np.exp(block, out=block)


def _multiply_rows(dS: np.ndarray, P: np.ndarray, r0: int, r1: int) -> None:
    np.multiply(dS[:, r0:r1], P[:, r0:r1], out=dS[:, r0:r1])


def _stacks(*arrays: np.ndarray) -> list[np.ndarray]:
    """Each (..., r, c) array as at least (1, r, c): one slab becomes a stack of one (a view)."""
    return [a[None] if a.ndim == 2 else a for a in arrays]


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

    Keeps only O((n + m) k) for the backward: the inputs, the output, L (..., n) and which rows
    are one-hot (l == 1).

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
    saturated = np.empty(queries.shape[:-1], dtype=bool)  # l == 1: the row's softmax is one-hot
    q3, k3, v3, out3 = _stacks(q, keys, v_aug, out)
    L3 = L[None] if L.ndim == 1 else L
    sat3 = saturated[None] if saturated.ndim == 1 else saturated

    def forward_slab(s: tuple, rows: RowRunner) -> None:
        """A (g, n, k) stack of slabs (heads of one sequence): out[s] and L[s]."""
        Q, K, V, O, Ls, sat = q3[s], k3[s], v3[s], out3[s], L3[s], sat3[s]
        g = Q.shape[0]
        for a, e in _blocks(n, block_q):
            mx = np.full((g, e - a), -np.inf, dtype=dtype)
            alpha = np.empty((g, e - a), dtype=dtype)
            acc = np.zeros((g, e - a, kv + 1), dtype=dtype)  # [alpha-rescaled P~ V, l]
            for k0, k1 in _blocks(key_end(e, m, causal), block_k):
                r = _first_row(a, k0, causal)  # rows a .. r - 1 see no key of this block
                S = np.matmul(Q[:, r:e], T(K[:, k0:k1]))
                crosses = _crosses(r, k0, k1, causal)
                if crosses:
                    band, above = causal_band(S, r, k0)
                    np.copyto(band, -np.inf, where=above)  # masked scores
                rows(partial(_online_softmax_rows, S, mx[:, r - a :], alpha[:, r - a :]), e - r, g * (k1 - k0))
                if crosses:
                    np.copyto(band, 0.0, where=above)  # masked weights exactly 0
                acc[:, r - a :] *= alpha[:, r - a :, None]
                acc[:, r - a :] += np.matmul(S, V[:, k0:k1])
            l = acc[..., kv]
            np.divide(acc[..., :kv], l[..., None], out=O[:, a:e])
            np.equal(l, 1.0, out=sat[:, a:e])
            np.log(l, out=l)
            np.add(mx, l, out=Ls[:, a:e])

    lead = q3.shape[:-2]
    groups = _groups(lead, _per_group(lead, block_q * min(m, block_k), dtype.itemsize))
    run_slabs(forward_slab, groups, n * m * math.prod(lead) // len(groups))
    skipped_nans(out, values, causal)  # a NaN value spoils its column in every row, as in the reference
    return out, (q, keys, v_aug, out, L, saturated, scale, causal, block_q, block_k)


def tiled_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values), recomputing each block's weights from L."""
    # forward: context_vec = softmax(q k^T) v, block by block; L = rowmax + log(rowsum)
    q, k, v_aug, out, L, saturated, scale, causal, block_q, block_k = cache
    n, m, kv = out.shape[-2], k.shape[-2], out.shape[-1]
    G = d_context_vec.astype(q.dtype, copy=False)
    D = row_dot(G, out)  # rowsum(G * O) = rowsum(dA * A)
    q_L = augment(q, -L)  # [q, -L] @ [k, 1]^T = q k^T - L
    k_1 = augment(k, 1.0)
    G_D = augment(G, -D)  # [G, -D] @ [v, 1]^T = G v^T - D
    d_queries, d_keys, d_values = like(q, q.shape[-1]), like(k, k.shape[-1]), like(k, kv)
    for grad in (d_queries, d_keys, d_values):
        grad.fill(0.0)
    q3, k3, v3, qL3, k13, GD3, G3 = _stacks(q, k, v_aug, q_L, k_1, G_D, G)
    sat3 = saturated[None] if saturated.ndim == 1 else saturated
    dq3, dk3, dv3 = _stacks(d_queries, d_keys, d_values)

    def backward_slab(s: tuple, rows: RowRunner) -> None:
        """A (g, n, k) stack of slabs: d_queries[s], d_keys[s], d_values[s]."""
        Q, K, V, QL, K1, GD, Gs, sat = q3[s], k3[s], v3[s], qL3[s], k13[s], GD3[s], G3[s], sat3[s]
        dQ, dK, dV = dq3[s], dk3[s], dv3[s]
        g = Q.shape[0]
        for a, e in _blocks(n, block_q):
            one_hot = bool(sat[:, a:e].any())  # rows with l == 1 in this query block
            for k0, k1 in _blocks(key_end(e, m, causal), block_k):
                r = _first_row(a, k0, causal)
                P = np.matmul(QL[:, r:e], T(K1[:, k0:k1]))  # scores - L
                rows(partial(_exp_rows, P), e - r, g * (k1 - k0))
                if _crosses(r, k0, k1, causal):
                    band, above = causal_band(P, r, k0)
                    np.copyto(band, 0.0, where=above)  # masked weights exactly 0
                dV[:, k0:k1] += np.matmul(T(P), Gs[:, r:e])
                dS = np.matmul(GD[:, r:e], T(V[:, k0:k1]))  # dA - D
                rows(partial(_multiply_rows, dS, P), e - r, g * (k1 - k0))
                if one_hot:
                    zero_saturated_maxima(dS, P, sat[:, r:e])  # rows with l == 1: one-hot
                dQ[:, r:e] += np.matmul(dS, K[:, k0:k1])
                dK[:, k0:k1] += np.matmul(T(dS), Q[:, r:e])

    lead = q3.shape[:-2]
    groups = _groups(lead, _per_group(lead, block_q * min(m, block_k), q.dtype.itemsize))
    run_slabs(backward_slab, groups, n * m * math.prod(lead) // len(groups))
    d_queries *= d_queries.dtype.type(scale)
    return d_queries, d_keys, d_values
