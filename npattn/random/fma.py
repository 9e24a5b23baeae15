"""Fused multiply-add, rounded once, in NumPy: what x86's FMA instructions compute.

PyTorch's CPU kernels contract ``a * b + c`` into one fused multiply-add (one rounding instead
of two) in ``uniform_``, in ``normal_`` and inside its AVX2 float32 log/sin/cos; reproducing
its streams bit for bit needs the same single rounding. NumPy has no FMA ufunc, so:

- float32: ``a * b`` of two float32 values is exact in float64, so ``s = a * b + c`` in
  float64 is rounded once; rounding ``s`` to float32 is then the FMA's result unless ``s``
  landed exactly on a midpoint between two float32 neighbours or in float32's subnormal
  range. Those rare elements are redone with the sum rounded to odd (exact).
- float64: Boldo and Melquiond's emulation (2008): the exact product ``p + e`` (Dekker),
  the exact sum ``c + p = h + t`` (Knuth's TwoSum), then ``h + RO(t + e)`` with ``RO``
  rounding to odd.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["fma_float32", "fma_float64"]

_LOW29 = np.uint64((1 << 29) - 1)  # the float64 mantissa bits below float32's last one
_HALF29 = np.uint64(1 << 28)  # ... equal to this: s lies exactly halfway between two float32
_TINY32 = 2.0**-125  # below this, float32 results are subnormal (or nearly)


def _two_sum(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """s, err with s = fl(a + b) and s + err == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(v: Any) -> tuple[Any, Any]:
    """Veltkamp's split of a float64 into two halves of at most 26 bits each."""
    t = 134217729.0 * v  # 2**27 + 1
    high = t - (t - v)
    return high, v - high


def _two_product(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """p, err with p = fl(a * b) and p + err == a * b exactly (Dekker)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _round_to_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b (float64) rounded to odd: exact sums stay, inexact ones take the neighbour whose
    last mantissa bit is 1. A later rounding to fewer bits is then correct (no double rounding)."""
    s, err = _two_sum(a, b)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    nudge = (err != 0) & even
    if nudge.any():
        s = np.where(nudge, np.nextafter(s, np.copysign(np.inf, err)), s)
    return s


def fma_float32(a: Any, b: Any, c: Any, *, may_underflow: bool = True) -> np.ndarray:
    """float32(a * b + c) rounded once, elementwise; a, b, c are float32 arrays or scalars
    (broadcast together). Returns a float32 array of the broadcast shape.

    ``may_underflow=False`` skips the subnormal-range check, for callers whose results are
    normal numbers or exact zeros (the Box-Muller polynomials).
    """
    s = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float32)
    s += np.float64(c) if np.ndim(c) == 0 else np.asarray(c, dtype=np.float32)
    out = np.asarray(s.astype(np.float32))
    suspect = np.abs(s) < _TINY32 if may_underflow else None
    bits = s.view(np.uint64)
    bits &= _LOW29  # s is no longer needed
    tie = bits == _HALF29
    suspect = tie if suspect is None else suspect | tie
    if suspect.any():
        idx = np.flatnonzero(suspect)
        a64, b64, c64 = (np.broadcast_to(np.asarray(v, np.float64), s.shape).ravel()[idx] for v in (a, b, c))
        out.reshape(-1)[idx] = _round_to_odd_sum(a64 * b64, c64).astype(np.float32)
    return out


_SCALE = 128  # a power of two that takes the largest float64 far below where Veltkamp's split overflows


def _fma_float64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p, e = _two_product(a, b)
    h, t = _two_sum(c, p)
    return np.asarray(h + _round_to_odd_sum(np.asarray(t), np.asarray(e)))


def fma_float64(a: Any, b: Any, c: Any) -> np.ndarray:
    """float64 a * b + c rounded once, elementwise (a, b, c broadcast together).

    Veltkamp's split multiplies by 2**27 + 1, so an operand above about 1.3e300 (or a product
    that overflows on the way) gives inf or NaN: such elements are redone with the larger of a
    and b, and c, scaled down by 2**-128 and the result scaled back (exact: powers of two), so
    ``uniform(-7e299, 7e299)`` and ``normal(0, 1e307)`` give PyTorch's numbers.
    """
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        out = _fma_float64(a, b, c)
        if np.isfinite(out).all():
            return out
        a, b, c = np.broadcast_arrays(a, b, c)
        redo = ~np.isfinite(out) & np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        if redo.any():
            ar, br, cr = a[redo], b[redo], c[redo]
            a_larger = np.abs(ar) >= np.abs(br)
            ar = np.where(a_larger, np.ldexp(ar, -_SCALE), ar)
            br = np.where(a_larger, br, np.ldexp(br, -_SCALE))
            out = np.array(out, copy=True)
            out[redo] = np.ldexp(_fma_float64(ar, br, np.ldexp(cr, -_SCALE)), _SCALE)
    return out
