"""One entry point for stages 2-5 that picks an implementation: reference, fused or tiled.

    context_vec, cache = attention(queries, keys, values, causal=..., impl="auto")
    d_queries, d_keys, d_values = attention_backward(d_context_vec, cache)

Every attention class calls these two instead of ``functional.attention_forward`` /
``attention_backward`` and passes its ``impl`` through. The implementations:

- ``"reference"``: ``functional.attention_forward``, the book's stages one by one (what ``trace``
  records). Always used while a recorder is installed, whenever dropout is on (the fast paths do
  not fuse dropout) and for an explicit ``mask`` array, whatever ``impl`` says.
- ``"fused"``: ``npattn.fused``: the same math in a few large BLAS calls and one elementwise pass
  each way; keeps one (..., n, m) buffer.
- ``"tiled"``: ``npattn.tiled``: FlashAttention's blocks; O(n) memory; with several slabs (heads,
  sequences) it splits them over the cores, each with its own BLAS thread (``blocks.run_slabs``).
- ``"auto"`` (the default): ``"reference"`` when a slab is tiny (n * m <= AUTO_SMALL, where
  Python overhead, not arithmetic, is the cost and the reference makes the fewest calls) or the
  leading axes of queries, keys and values differ (broadcasting is the reference's); ``"tiled"``
  when the fused path's n x m buffer (all slabs) would exceed AUTO_TILED_BYTES, or when there
  are several slabs to split over the cores (``blocks.splits_slabs``: two or more slabs and
  cores, and threadpoolctl to keep each worker's BLAS on one thread); else ``"fused"``.
  How they were measured (2-core machine, float32, d = 64; the README has the tables):
  ``benchmarks/bench_crossover.py`` times stages 2-5 forward + backward on every path for n = 8
  to 1024: the reference path is faster up to n = 192 (its few calls beat the fused path's fixed
  cost of ~30 us), the fused path from n = 256 on. ``benchmarks/bench_memory.py`` shows the fused
  path faster than the tiled one at every n where both run (tiled/fused 1.1-1.4 up to n = 16384),
  for one slab, so for one slab the switch to tiled is a memory rule: above AUTO_TILED_BYTES per
  n x m buffer (n > 8192 for one float32 head) the fused path would hold two such buffers
  (>= 1 GiB), while the tiled path needs O(n) memory for at most ~1.2x the time. With several
  slabs, ``benchmarks/bench_mha.py`` shows the tiled path ahead: the fused path's batched
  products are BLAS calls that each wait for every BLAS thread, which on a busy machine costs
  several times the arithmetic, while the tiled path hands work to the cores once per call.

Inputs are (..., n, k), (..., m, k), (..., m, kv): one head (n, k), a batch (b, n, k) or heads
(b, h, n, k). ``causal=True`` applies the book's mask (key j > query i masked).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npattn.errors import ConfigError
from npattn.kernels.blocks import splits_slabs
from npattn.kernels.fused import fused_backward, fused_forward
from npattn.kernels.tiled import tiled_backward, tiled_forward
from npattn.nn import functional as F
from npattn.nn.functional import Recorder

__all__ = ["AUTO_SMALL", "AUTO_TILED_BYTES", "IMPLS", "attention", "attention_backward", "check_impl", "choose_impl"]

IMPLS = ("auto", "reference", "fused", "tiled")
AUTO_SMALL = 192 * 192
"""``impl="auto"`` runs the reference path when n * m is at most this (measured crossover, d = 64)."""
AUTO_TILED_BYTES = 256 * 2**20
"""``impl="auto"`` runs the tiled path when one (..., n, m) buffer would take more bytes than this."""


def check_impl(impl: Any) -> str:
    """Return ``impl`` if it is one of IMPLS, else raise ConfigError."""
    if not isinstance(impl, str) or impl not in IMPLS:
        raise ConfigError(f"impl must be one of {', '.join(map(repr, IMPLS))}, got {impl!r}")
    return impl


def choose_impl(
    impl: str,
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    *,
    dropout: bool = False,
    record: Recorder | None = None,
) -> str:
    """The implementation ``attention`` will run: "reference", "fused" or "tiled" (rules above).

    ``dropout=True`` stands for anything only the reference path does (dropout, an explicit mask).
    """
    check_impl(impl)
    if record is not None or dropout:
        return "reference"
    if impl != "auto":
        return impl
    n, m = queries.shape[-2], keys.shape[-2]
    if n * m <= AUTO_SMALL or not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:
        return "reference"
    slabs = math.prod(queries.shape[:-2])
    if slabs * n * m * queries.dtype.itemsize > AUTO_TILED_BYTES or splits_slabs(slabs):
        return "tiled"
    return "fused"


def attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    *,
    causal: bool = False,
    impl: str = "auto",
    mask: np.ndarray | None = None,
    dropout_keep: np.ndarray | None = None,
    dropout_p: float = 0.0,
    record: Recorder | None = None,
    block_q: int | None = None,
    block_k: int | None = None,
) -> tuple[np.ndarray, tuple]:
    """Stages 2 to 5: (..., n, k), (..., m, k), (..., m, kv) -> (context_vec (..., n, kv), cache).

    ``mask`` (an explicit (n, m) bool mask, True = masked), ``dropout_keep`` and ``dropout_p`` are
    ``functional.attention_forward``'s and force the reference path (for the book's causal mask,
    pass ``causal=True`` instead: every path has it); ``block_q``/``block_k`` are the tiled
    path's block sizes (None: its defaults).

    Raises:
        ConfigError: unknown ``impl`` or a bad block size.
        ShapeError, DTypeError: inputs the chosen path cannot take (the fast paths need equal
            leading axes and one float dtype; the reference path broadcasts).
    """
    if mask is not None and causal:
        raise ConfigError("attention: pass either causal=True or a mask, not both")
    fallback = dropout_keep is not None or mask is not None
    chosen = choose_impl(impl, queries, keys, values, dropout=fallback, record=record)
    if chosen == "fused":
        out, cache = fused_forward(queries, keys, values, causal=causal)
    elif chosen == "tiled":
        blocks = {name: size for name, size in (("block_q", block_q), ("block_k", block_k)) if size is not None}
        out, cache = tiled_forward(queries, keys, values, causal=causal, **blocks)
    else:
        if causal:
            mask = F.causal_mask(queries.shape[-2], keys.shape[-2])
        out, cache = F.attention_forward(
            queries, keys, values, mask=mask, dropout_keep=dropout_keep, dropout_p=dropout_p, record=record
        )
    return out, (chosen, cache)


def attention_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values) with the backward of the path the forward ran."""
    chosen, inner = cache
    if chosen == "fused":
        return fused_backward(d_context_vec, inner)
    if chosen == "tiled":
        return tiled_backward(d_context_vec, inner)
    return F.attention_backward(d_context_vec, inner)
