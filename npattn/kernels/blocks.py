"""Shared helpers of the fast paths (fused, tiled): input checks, parallel work on a small thread
pool (one thread per core), the causal mask on a block.

NumPy releases the GIL inside its ufunc loops and BLAS calls, so Python threads that work on
their own rows or slabs use several cores. Two ways to split the work:

- ``run_rows``: one elementwise phase, its rows split over the pool, while the matrix products run
  in the calling thread (where BLAS uses its own threads), so the two never compete for the cores.
- ``run_slabs``: whole (n, k) slabs (one head of one sequence each) split over the pool, each
  worker running its products on one BLAS thread and its elementwise work in its own cache. One
  hand-off per call instead of one per product and per phase: every multi-threaded BLAS call and
  every hand-off waits for the slowest thread, and on a busy machine that wait is what costs
  most. Each worker takes the next slab as it finishes one, so a core that another process
  slows down gets fewer slabs. It needs a BLAS whose thread count can be set for the duration (``threadpoolctl``,
  installed with ``pip install npattn[fast]``); without it, slabs run one after the other in
  the calling thread with ``run_rows``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

from npattn.errors import DTypeError, ShapeError

__all__ = [
    "MIN_PARALLEL_ELEMENTS",
    "T",
    "augment",
    "causal_band",
    "causal_fill",
    "check_qkv",
    "flat",
    "flush_below",
    "key_end",
    "like",
    "num_workers",
    "row_dot",
    "run_rows",
    "run_slabs",
    "serial_rows",
    "skipped_nans",
    "splits_slabs",
]

MIN_PARALLEL_ELEMENTS = 1 << 17
"""Below this many elements a phase runs in the calling thread (a hand-off costs ~50 us)."""

_pool: ThreadPoolExecutor | None = None


def num_workers() -> int:
    """Cores this process may use (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=num_workers(), thread_name_prefix="npattn")
    return _pool


def run_rows(fn: Callable[[int, int], None], n_rows: int, row_elements: int) -> None:
    """Call ``fn(r0, r1)`` over rows [0, n_rows) split into one contiguous piece per core.

    ``fn`` must touch only its own rows. Small jobs (n_rows * row_elements below
    MIN_PARALLEL_ELEMENTS) or a single core run as one call in the calling thread.
    """
    workers = num_workers()
    if workers == 1 or n_rows < 2 or n_rows * row_elements < MIN_PARALLEL_ELEMENTS:
        fn(0, n_rows)
        return
    parts = min(workers, n_rows)
    bounds = [n_rows * i // parts for i in range(parts + 1)]
    first, *rest = pairwise(bounds)
    futures = [_get_pool().submit(fn, a, b) for a, b in rest]
    fn(*first)
    for f in futures:
        f.result()


def serial_rows(fn: Callable[[int, int], None], n_rows: int, row_elements: int) -> None:
    """``run_rows`` in the calling thread: ``fn(0, n_rows)`` (what a pool worker uses)."""
    fn(0, n_rows)


RowRunner = Callable[[Callable[[int, int], None], int, int], None]
_blas: Any = None  # threadpoolctl's controller of the loaded BLAS, False when unavailable


def _blas_controller() -> Any:
    """threadpoolctl's controller of the loaded BLAS libraries, or False without threadpoolctl."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController().select(user_api="blas") or False
        except ImportError:
            _blas = False
    return _blas


def splits_slabs(count: int) -> bool:
    """Whether ``run_slabs`` can split ``count`` slabs over the cores (with BLAS on one thread)."""
    return count > 1 and num_workers() > 1 and bool(_blas_controller())


def run_slabs(fn: Callable[[tuple, RowRunner], None], slabs: Sequence[tuple], slab_elements: int) -> None:
    """Call ``fn(s, rows)`` for every slab index s; ``rows`` is the row runner fn must use.

    Split over the pool (BLAS on one thread, ``rows = serial_rows``; each worker takes the next
    slab not yet taken) when there are several
    slabs and cores, the work is at least MIN_PARALLEL_ELEMENTS and BLAS threads can be limited;
    else one slab after another in the calling thread with ``rows = run_rows``. ``fn`` must
    write only its own slab's outputs.
    """
    workers = min(num_workers(), len(slabs))
    if not (splits_slabs(len(slabs)) and len(slabs) * slab_elements >= MIN_PARALLEL_ELEMENTS):
        for s in slabs:
            fn(s, run_rows)
        return
    pending = iter(slabs)
    lock = threading.Lock()

    def take() -> None:
        """Run the next slab not yet taken until none is left: a worker that the machine slows
        down (another process on its core) takes fewer slabs instead of holding up the call."""
        while True:
            with lock:
                s = next(pending, None)
            if s is None:
                return
            fn(s, serial_rows)

    with _blas_controller().limit(limits=1):  # BLAS back to its own thread count on the way out
        futures = [_get_pool().submit(take) for _ in range(workers - 1)]
        try:
            take()
        finally:
            for f in futures:
                f.result()


_TRIU: dict[int, np.ndarray] = {}


def causal_fill(block: np.ndarray, row0: int, col0: int, value: float) -> None:
    """Set ``block[i, j] = value`` where key col0 + j lies after query row0 + i (the book's mask).

    ``block`` is a (rows, cols) window of a score matrix whose first element is (row0, col0).
    """
    # Only rows i < col0 + cols - 1 - row0 have a masked key in the block.
    block = block[: max(0, col0 + block.shape[1] - 1 - row0)]
    rows, cols = block.shape
    if rows == 0:
        return
    # Keys from row0 + rows on are after every query of the block.
    first_full = max(0, row0 + rows - col0)
    if first_full < cols:
        block[:, first_full:] = value
    # The diagonal band: element (i, j) is masked when j - offset > i, offset = row0 - col0.
    offset = row0 - col0
    lo, stop = max(0, offset), min(cols, first_full)
    if lo >= stop:
        return
    mask = _TRIU.get(rows)
    if mask is None:
        mask = _TRIU[rows] = np.triu(np.ones((rows, rows), dtype=bool), k=1)
    np.putmask(block[:, lo:stop], mask[:, lo - offset : stop - offset], value)


_ABOVE: list[np.ndarray] = [np.zeros((0, 0), dtype=bool)]


def causal_band(block: np.ndarray, row0: int, col0: int) -> tuple[np.ndarray, np.ndarray]:
    """The part of a block of scores (..., rows, cols) that the book's mask touches, and where:
    ``(band, above)``; ``np.copyto(band, value, where=above)`` sets the masked entries.

    ``block``'s first element is (query row0, key col0), row0 >= col0, and the block holds no key
    after its last query (col0 + cols <= row0 + rows). Then key col0 + j lies after query row0 + i
    only in ``band = block[..., row0 - col0:]``, exactly where the bool ``above`` (band's last two
    axes; it broadcasts over the leading ones) is True: above the band's diagonal.
    """
    rows, cols = block.shape[-2:]
    lo = row0 - col0
    if lo < 0 or col0 + cols > row0 + rows:
        raise ValueError(f"causal_band: block at ({row0}, {col0}) of shape {block.shape} is not a causal block")
    width = cols - lo
    if _ABOVE[0].shape[0] < max(rows, width):
        size = max(rows, width)
        _ABOVE[0] = np.triu(np.ones((size, size), dtype=bool), k=1)
    return block[..., lo:], _ABOVE[0][:rows, :width]


def check_qkv(queries: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
    """The fast paths need (..., n, k), (..., m, k), (..., m, kv) with equal leading axes and one float dtype.

    Raises:
        ShapeError: ranks, leading axes, the key dimension or m disagree; m = 0.
        DTypeError: not float32 or float64 (float16's exp would floor every weight near 0.06 of the
            row's largest), or dtypes differ.
    """
    arrays = {"queries": queries, "keys": keys, "values": values}
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.ndim < 2:
            raise ShapeError(f"{name}: expected an array of shape (..., n, k), got {np.shape(a)}")
        if a.dtype.kind != "f" or a.dtype.itemsize < 4:
            raise DTypeError(
                f"{name}: expected a float32 or float64 array, got dtype {a.dtype} "
                "(npattn.kernels.attention converts other dtypes for you)"
            )
    if not queries.dtype == keys.dtype == values.dtype:
        raise DTypeError(f"queries, keys, values: dtypes differ ({queries.dtype}, {keys.dtype}, {values.dtype})")
    if not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:
        raise ShapeError(
            "queries, keys, values: the fast paths need equal leading (batch, head) axes, got "
            f"{queries.shape}, {keys.shape}, {values.shape}"
        )
    if queries.shape[-1] != keys.shape[-1]:
        raise ShapeError(f"queries {queries.shape} and keys {keys.shape}: last dimensions differ")
    if keys.shape[-2] == 0:
        raise ShapeError(f"keys {keys.shape}: no keys to attend to (the reference path returns zeros)")
    if keys.shape[-2] != values.shape[-2]:
        raise ShapeError(f"keys {keys.shape} and values {values.shape}: numbers of rows differ")


def T(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def flat(a: np.ndarray) -> np.ndarray:
    """(..., r, c) -> (B, r, c), C-contiguous (a view when it already is)."""
    return np.ascontiguousarray(a).reshape(-1, *a.shape[-2:])


def like(a: np.ndarray, last: int) -> np.ndarray:
    """An empty (..., r, last) array whose axes lie in memory in the order of ``a``'s (..., r, c).

    Heads split from (b, n, d_out) are a (b, h, n, hd) view of (b, n, h, hd) memory; an output or
    gradient laid out the same way merges back to (b, n, d_out) without a copy.
    """
    order = [*sorted(range(a.ndim - 1), key=lambda i: a.strides[i], reverse=True), a.ndim - 1]
    shape = [*(a.shape[i] for i in order[:-1]), last]
    return np.empty(shape, dtype=a.dtype).transpose(np.argsort(order))


def key_end(e: int, m: int, causal: bool) -> int:
    """Keys [0, key_end) that query rows [.., e) may see: all m, or (causal) keys 0 .. e - 1.

    Causal attention skips every key after a block's last query: in a (b, h, n, n) problem that
    halves the work of every matrix product and elementwise pass.
    """
    return min(m, e) if causal else m


def skipped_nans(out: np.ndarray, values: np.ndarray, causal: bool) -> None:
    """Causal paths that skip the keys after a block's queries: give ``out`` (..., n, kv) the NaNs
    the reference path has.

    The reference path multiplies a masked key's weight, exactly 0, by its value: a NaN or inf in
    any value makes that column NaN in every row (0 * NaN). The skipped products never multiply,
    so the column is set to NaN here: every path gives the same NaN pattern.
    """
    if causal:
        bad = ~np.isfinite(values).all(axis=-2)  # (..., kv)
        if bad.any():
            out[np.broadcast_to(bad[..., None, :], out.shape) & np.isfinite(out)] = np.nan


def augment(a: np.ndarray, column: np.ndarray | float) -> np.ndarray:
    """(..., r, c) -> (..., r, c + 1): ``a`` with ``column`` appended as its last column."""
    out = np.empty((*a.shape[:-1], a.shape[-1] + 1), dtype=a.dtype)
    out[..., :-1] = a
    out[..., -1] = column
    return out


def row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., n, c), (..., n, c) -> (..., n): rowsum(a * b) without the (..., n, c) product."""
    return np.einsum("...ij,...ij->...i", a, b)


def zero_saturated_maxima(dS: np.ndarray, P: np.ndarray, saturated: np.ndarray) -> None:
    """Score gradients (g, rows, cols) at the maximum of each saturated row: set to 0 in place.

    A row is saturated when its softmax denominator l is exactly 1 in its dtype (``saturated``,
    (g, rows) bool): the maximum's weight is 1 and every other weight is below half an ulp of it.
    There softmax_backward's A * (dA - D) is 0 at the maximum up to terms below the dtype's eps
    (D = rowsum(dA * A) = dA at the maximum), which is what the reference path computes; the fast
    paths' D, rowsum(G * context_vec), is the same sum rounded in another order, and leaves a
    residue of eps * |G| * |values| there (times |keys| in d_queries) where the true gradient is
    about 0. The maximum is the one weight above 1/2 (``P``, the same block's weights).
    """
    b, r = np.nonzero(saturated)
    if b.size:
        rows = dS[b, r]
        rows[P[b, r] > 0.5] = 0.0
        dS[b, r] = rows


def flush_below(dtype: np.dtype) -> float:
    """The fast paths compute exp(max(x, flush_below)) for the unnormalised weights.

    log(finfo.tiny) + nmant * log(2): float32 -71.4 (weights floored at 9e-32), float64 -672.4
    (1e-292). exp of anything lower, and its products with ordinary gradients, would be subnormal
    numbers, on which x86 CPUs run BLAS and ufuncs many times slower (a saturated softmax, e.g.
    SelfAttention_v1's U[0, 1) weights at d_in = 768, made the fused path 2.5x slower). A weight
    raised to the floor changes a row's sum by at most m * 9e-32 of its largest weight (float32):
    far below rounding. Masked weights stay exactly 0.
    """
    info = np.finfo(dtype)
    return float(np.log(info.tiny) + info.nmant * np.log(2.0))
