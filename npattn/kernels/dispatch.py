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
- Whatever ``impl`` says, inputs whose scaled scores may pass FAST_SCORE_LIMIT run on the
  reference path (every softmax row is one-hot there; see FAST_SCORE_LIMIT), and so do inputs
  holding NaN or inf (every path then gives the reference's NaN rows).

Inputs are (..., n, k), (..., m, k), (..., m, kv): one head (n, k), a batch (b, n, k) or heads
(b, h, n, k). ``causal=True`` applies the book's mask (key j > query i masked).

Every path gives the same numbers because every path computes in the same dtype,
``compute_dtype``: the inputs' common dtype (ints and bools become float64, as in NumPy), but
float32 for float16 (whose exp and row sums would keep three digits, and whose scores overflow
at 65504), and float64 again when a float32 forward overflows (scores beyond 3.4e38 from finite
inputs: the reference path would give NaN where the fast paths' scaled scores still fit). The
output and the gradients come back in the inputs' dtypes. The cache holds private copies:
editing queries, keys, values or the returned output before ``attention_backward`` cannot
change the gradients.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npattn._checks import as_array, as_number, cast, check_bool, check_positive_int, finite_float
from npattn.errors import ConfigError, ShapeError
from npattn.kernels.blocks import splits_slabs
from npattn.kernels.fused import fused_backward, fused_forward
from npattn.kernels.tiled import tiled_backward, tiled_forward
from npattn.nn import functional as F
from npattn.nn.functional import Recorder
from npattn.nn.functional.attention import check_head_dim
from npattn.nn.functional.contract import StageCache, check_bool_mask, check_dropout, stage_cache

__all__ = [
    "AUTO_SMALL",
    "AUTO_TILED_BYTES",
    "FAST_SCORE_LIMIT",
    "IMPLS",
    "attention",
    "attention_backward",
    "check_impl",
    "choose_impl",
    "compute_dtype",
]

IMPLS = ("auto", "reference", "fused", "tiled")
AUTO_SMALL = 192 * 192
"""``impl="auto"`` runs the reference path when n * m is at most this (measured crossover, d = 64)."""
AUTO_TILED_BYTES = 256 * 2**20
"""``impl="auto"`` runs the tiled path when one (..., n, m) buffer would take more bytes than this."""
FAST_SCORE_LIMIT = 1e6
"""The fused and tiled paths run only while sqrt(k) * max|queries| * max|keys|, a bound on every
|scaled score|, is at most this (finite inputs; any ``impl``); beyond it the reference path runs.
There every softmax row is saturated: the reference's weights underflow to exactly 0 and so do its
score gradients, while the fast paths' D = rowsum(G * context_vec) leaves a rounding residue in
(dA - D) at each row's maximum (eps * |G| * |values|, times |keys| in d_queries): harmless at
ordinary sizes, but with float32 inputs of 1e17 it overflowed the weight gradients to inf where
the true gradient is 0. (Below the limit the fast paths set that residue to 0 on the rows that are
one-hot in their dtype: ``blocks.zero_saturated_maxima``.)"""


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
    An empty sequence or batch (no keys, no queries) also runs on the reference path, whatever
    ``impl`` says: its answer (zeros, as PyTorch gives) is the same on every path, and only the
    reference defines it.
    """
    check_impl(impl)
    if record is not None or dropout or keys.shape[-2] == 0 or queries.size == 0:
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


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype stages 2-5 run in for inputs of ``dtype``: float32 for anything narrower, else ``dtype``."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _operand(value: Any, name: str) -> np.ndarray:
    """queries, keys or values as a real floating array of rank >= 2 (ints and bools -> float64)."""
    arr = as_array(value, name)
    if arr.ndim < 2:
        raise ShapeError(f"{name}: expected an array of shape (..., n, k), got shape {arr.shape}")
    return arr


def _run(
    chosen: str, arrays: list[np.ndarray], causal: bool, mask: np.ndarray | None, options: dict[str, Any]
) -> tuple[np.ndarray, Any]:
    """Stages 2 to 5 on the chosen path, in the inputs' (one) dtype; ``options`` is empty or holds
    every optional argument of ``attention``."""
    q, k, v = arrays
    if chosen == "fused":
        return fused_forward(q, k, v, causal=causal)
    if chosen == "tiled":
        blocks = {name: options[name] for name in ("block_q", "block_k") if options.get(name) is not None}
        return tiled_forward(q, k, v, causal=causal, **blocks)
    if causal:
        mask = F.causal_mask(q.shape[-2], k.shape[-2])
    if not options:  # no dropout, no recorder
        return F.attention_forward(q, k, v, mask=mask)
    dropout = {"dropout_keep": options["dropout_keep"], "dropout_p": options["dropout_p"]}
    return F.attention_forward(q, k, v, mask=mask, record=options["record"], **dropout)


def attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    *,
    causal: bool | None = None,
    impl: str = "auto",
    mask: np.ndarray | None = None,
    dropout_keep: np.ndarray | None = None,
    dropout_p: float = 0.0,
    record: Recorder | None = None,
    block_q: int | None = None,
    block_k: int | None = None,
    copy: bool = True,
    is_causal: bool | None = None,
    attn_mask: Any = None,
    scale: float | None = None,
) -> tuple[np.ndarray, tuple]:
    """Stages 2 to 5: (..., n, k), (..., m, k), (..., m, kv) -> (context_vec (..., n, kv), cache).

    PyTorch's ``scaled_dot_product_attention`` names: ``is_causal`` is ``causal``; ``scale``
    is accepted at the book's 1/sqrt(k) only; ``attn_mask`` is refused (its True means "attend",
    npattn's ``mask`` True means "masked": pass ``mask=~attn_mask``).

    ``mask`` (an explicit (n, m) bool mask, True = masked), ``dropout_keep`` and ``dropout_p`` are
    ``functional.attention_forward``'s and force the reference path (for the book's causal mask,
    pass ``causal=True`` instead: every path has it); ``block_q``/``block_k`` are the tiled
    path's block sizes (None: its defaults). Runs in ``compute_dtype`` (see the module docstring);
    context_vec has the inputs' common dtype. The cache keeps copies of queries, keys and values;
    ``copy=False`` skips them when the caller will not edit those arrays before
    ``attention_backward`` (the attention classes pass their own fresh projections).

    Raises:
        ConfigError: unknown ``impl``, a bad block size, ``causal`` not a bool, both ``causal`` and
            ``mask``, ``dropout_p`` outside [0, 1), ``dropout_p`` > 0 without ``dropout_keep`` (no
            dropout would run), ``record`` not callable.
        ShapeError, DTypeError: inputs that are not (..., n, k), (..., m, k), (..., m, kv) arrays of
            real numbers, with leading (batch, head) axes that differ (no path broadcasts them);
            k = 0 (the scale 1/sqrt(k) is undefined); a
            ``mask`` or ``dropout_keep`` that is not a bool array.
    """
    if is_causal is not None or attn_mask is not None or scale is not None:
        causal = _torch_names(causal, is_causal, attn_mask, scale, np.shape(queries)[-1:])
    if copy is not True and copy is not False:
        copy = check_bool(copy, "attention: copy")
    if causal is None:  # unset (PyTorch's is_causal may have set it above): the book's default, no mask
        causal = False
    elif causal is not False and causal is not True:
        causal = check_bool(causal, "causal")
    arrays = [queries, keys, values]
    for i, a in enumerate(arrays):  # the common case costs a few attribute reads; anything else is converted
        if type(a) is not np.ndarray or a.ndim < 2 or a.dtype.kind != "f":
            arrays[i] = _operand(a, ("queries", "keys", "values")[i])
    check_head_dim(arrays[0], arrays[1], "attention")
    if not arrays[0].shape[:-2] == arrays[1].shape[:-2] == arrays[2].shape[:-2]:
        raise ShapeError(
            "attention: queries, keys and values need equal leading (batch, head) axes, got "
            f"{arrays[0].shape}, {arrays[1].shape}, {arrays[2].shape} (no path broadcasts them: repeat a shared "
            "key or value head with np.broadcast_to(...).copy())"
        )
    plain = mask is None and dropout_keep is None and record is None and block_q is None and block_k is None
    plain = plain and type(dropout_p) is float and dropout_p == 0.0  # nothing optional to check
    if not plain:
        mask, dropout_keep = _check_options(causal, mask, dropout_keep, dropout_p, record, block_q, block_k)
        if (block_q is not None or block_k is not None) and impl in ("reference", "fused"):
            raise ConfigError(
                f"attention: block_q and block_k are the tiled path's block sizes, and impl={impl!r} has no "
                "blocks; use impl='tiled' (or 'auto'), or leave them unset"
            )
    chosen = choose_impl(impl, *arrays, dropout=dropout_keep is not None or mask is not None, record=record)
    if chosen != "reference" and _reference_only(*arrays):
        chosen = "reference"  # see FAST_SCORE_LIMIT
    options: dict[str, Any] = {} if plain else {
        "dropout_keep": dropout_keep, "dropout_p": dropout_p, "block_q": block_q, "block_k": block_k, "record": record
    }
    q, k, v = arrays
    dtypes = (q.dtype, k.dtype, v.dtype)
    dtype = dtypes[0] if dtypes[0] == dtypes[1] == dtypes[2] else np.result_type(*dtypes)
    compute = dtype if dtype.itemsize >= 4 else np.dtype(np.float32)  # compute_dtype(dtype)
    # With copy (the default), the cache refers to private arrays, never to the caller's.
    out, inner = _run(
        chosen, [a.astype(compute) if copy or a.dtype != compute else a for a in arrays], causal, mask, options
    )
    # A NaN or inf anywhere in out makes its sum non-finite (a sum that overflows only costs a redo).
    overflowed = compute.itemsize < 8 and not math.isfinite(np.add.reduce(out, None))
    if overflowed and all(np.isfinite(a).all() for a in arrays):
        # Finite inputs, non-finite output: the scores overflowed float32. Every path redoes it in float64.
        compute = np.dtype(np.float64)
        options = {**options, "record": None} if options else options
        out, inner = _run(chosen, [a.astype(compute) for a in arrays], causal, mask, options)
    # The fast paths' caches hold their output: the caller gets a copy of it.
    if chosen != "reference" or out.dtype != dtype:
        out = out.astype(dtype)
    return out, stage_cache((chosen, inner, compute, dtypes, out.shape), "kernels.attention", (out.shape,))


def _reference_only(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> bool:
    """Inputs only the reference path gives the reference's numbers for: scaled scores that may
    exceed FAST_SCORE_LIMIT (a bound: sqrt(k) max|q| max|k|), or NaN or inf anywhere (the fast
    paths' floored weights would give tiny x inf = inf where the reference's 0 x inf is NaN)."""
    if not q.size or not k.size:
        return False
    big_q, big_k = max(float(q.max()), -float(q.min())), max(float(k.max()), -float(k.min()))
    if not (math.isfinite(big_q) and math.isfinite(big_k)) or not math.isfinite(float(np.add.reduce(v, None))):
        return True  # NaN or inf (a sum of finite values that overflows only costs the reference path)
    return math.sqrt(q.shape[-1]) * big_q * big_k > FAST_SCORE_LIMIT


def _check_options(
    causal: bool,
    mask: Any,
    dropout_keep: Any,
    dropout_p: Any,
    record: Any,
    block_q: int | None,
    block_k: int | None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``attention``'s optional arguments checked; returns mask and dropout_keep as arrays (or None)."""
    if mask is not None:
        mask = check_bool_mask(np.asarray(mask), "mask", "True = masked")
        if causal:
            raise ConfigError("attention: pass either causal=True or a mask, not both")
    if dropout_keep is not None:
        dropout_keep = check_bool_mask(np.asarray(dropout_keep), "dropout_keep", "True = kept")
    check_dropout(dropout_keep, dropout_p, "attention")
    if record is not None and not callable(record):
        raise ConfigError(f"record must be None or a function record(name, array), got {type(record).__name__}")
    if block_q is not None:
        check_positive_int(block_q, "block_q")
    if block_k is not None:
        check_positive_int(block_k, "block_k")
    return mask, dropout_keep


def _torch_names(causal: Any, is_causal: Any, attn_mask: Any, scale: Any, head_dim: tuple[int, ...]) -> Any:
    """``causal`` from PyTorch's SDPA keywords (see ``attention``)."""
    if attn_mask is not None:
        raise ConfigError(
            "attention: attn_mask is PyTorch's mask, whose True means 'attend'; npattn's mask= is True where a score "
            "is masked: pass mask=~attn_mask (or causal=True for the causal mask)"
        )
    if scale is not None and head_dim:
        book = 1.0 / math.sqrt(head_dim[0]) if head_dim[0] else math.inf
        number = finite_float(as_number(scale))  # a NumPy scalar, a 0-d array or tensor: its number
        if number is not None and not math.isclose(number, book, rel_tol=1e-12, abs_tol=0.0):
            number = None if number not in _book_scale_rounded(book) else book  # 1/sqrt(k) held in a narrower float
        if number is None:
            raise ConfigError(
                f"attention: scale={scale!r:.40} is not supported: npattn scales the scores by 1/sqrt(k) = {book!r} "
                "(the book's); to scale by s, multiply the queries by s * sqrt(k)"
            )
    if is_causal is not None:
        if causal is not None:  # even causal=False: one of the two would be ignored
            raise ConfigError("attention: give causal= or PyTorch's is_causal=, not both")
        return check_bool(is_causal, "is_causal")
    return causal


def _book_scale_rounded(book: float) -> set[float]:
    """1/sqrt(k) rounded to float32, float16 and bfloat16 (a tensor of the book's scale in those
    dtypes holds one of these), as Python floats; for each of them, when 1/sqrt(k) is not one
    of their numbers, also the numbers one unit in the last place on either side (1/sqrt(k) computed
    in that dtype, ``1 / np.sqrt(np.float32(7))``, rounds twice and may land there; an exact 0.5 has
    no such neighbours: 0.5005 is another scale)."""
    f32 = np.float32(book)
    bits = int(f32.view(np.uint32))
    bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16  # round to nearest even at bfloat16's 8 bits
    rounded = {float(np.uint32(bf16).view(np.float32))}
    if rounded != {book}:  # bfloat16 one unit in its last place (2**16 in float32's bits) on either side
        rounded |= {float(np.uint32(bf16 + step).view(np.float32)) for step in (-(1 << 16), 1 << 16)}
    for narrow in (f32, np.float16(book)):
        rounded.add(float(narrow))
        if float(narrow) != book:
            rounded |= {float(np.nextafter(narrow, narrow.dtype.type(0))),
                        float(np.nextafter(narrow, narrow.dtype.type(np.inf)))}  # fmt: skip
    return rounded


def attention_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values), in the forward inputs' dtypes, with the backward of
    the path the forward ran.

    Raises:
        ConfigError: ``cache`` is not the one ``attention`` returned.
        ShapeError, DTypeError: ``d_context_vec`` not an array of the forward output's shape.
    """
    if not (type(cache) is StageCache and cache.stage == "kernels.attention"):
        if isinstance(cache, StageCache):
            got = f"the cache {cache.stage} returned (pass it to the backward of the forward that made it)"
        else:
            got = f"{type(cache).__name__} {cache!r:.40}"
        raise ConfigError(f"kernels.attention_backward: cache must be the cache kernels.attention returned, got {got}")
    chosen, inner, compute, dtypes, out_shape = cache
    d = d_context_vec
    if type(d) is not np.ndarray or d.dtype.kind != "f":
        d = as_array(d, "d_context_vec")
    if d.shape != out_shape:
        raise ShapeError(f"attention_backward: expected a gradient of shape {out_shape} (the output's), got {d.shape}")
    d = cast(d, compute, "kernels.attention_backward: d_context_vec")  # refused where it would become inf
    if chosen == "fused":
        grads = fused_backward(d, inner)
    elif chosen == "tiled":
        grads = tiled_backward(d, inner)
    else:
        grads = F.attention_backward(d, inner)
    d_queries, d_keys, d_values = grads
    if compute != dtypes[0] or compute != dtypes[1] or compute != dtypes[2]:  # one its dtype cannot hold: refused
        names = ("d_queries", "d_keys", "d_values")
        d_queries, d_keys, d_values = (
            cast(g, dt, f"kernels.attention_backward: {n}") for g, dt, n in zip(grads, dtypes, names)
        )
    return d_queries, d_keys, d_values
