"""The Box-Muller transforms behind PyTorch's CPU ``normal_``/``randn``.

Two layouts, chosen by size (aten/src/ATen/native/cpu/DistributionTemplates.h):

- fewer than 16 elements: one element at a time, ``normal_distribution<double>``: two double
  uniforms u1, u2 give r = sqrt(-2 log1p(-u2)), theta = 2 pi u1; the element is
  r cos(theta) * std + mean (fused) and r sin(theta) is cached for the next element drawn.
- 16 elements or more: fill the tensor with uniforms of its dtype, then transform each block of
  16 in place: u1 = 1 - block[0:8], u2 = block[8:16], radius = sqrt(-2 log u1),
  theta = 2 pi u2, block[0:8] = radius cos(theta), block[8:16] = radius sin(theta) (each times
  std plus mean, fused). When the size is not a multiple of 16, 16 fresh uniforms replace the
  last 16 elements and are transformed the same way.

float64 blocks use the C library's log/sin/cos (Python's ``math`` calls the same functions);
float32 blocks use the AVX2 Cephes code reproduced in :mod:`npattn.random.cephes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from npattn.random.cephes import log_ps, sincos_ps
from npattn.random.fma import fma_float32, fma_float64

__all__ = ["box_muller_pair", "normal_blocks"]

_BLOCKS_PER_CHUNK = 8192  # 131072 values per NumPy pass: fits the cache, few Python steps


def box_muller_pair(u1: float, u2: float) -> tuple[float, float]:
    """The scalar path's pair (r cos theta, r sin theta) from two double uniforms."""
    r = math.sqrt(-2.0 * math.log1p(-u2))
    theta = 2.0 * math.pi * u1
    return r * math.cos(theta), r * math.sin(theta)


def _libm_log(x: np.ndarray) -> np.ndarray:
    """The C library's log, element by element (NumPy's float64 log rounds differently)."""
    return np.fromiter(map(math.log, x), np.float64, len(x))


def _libm_sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The C library's sin and cos, element by element."""
    return np.fromiter(map(math.sin, x), np.float64, len(x)), np.fromiter(map(math.cos, x), np.float64, len(x))


def _radius_and_trig(u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """radius = sqrt(-2 log(1 - u1)), sin and cos of 2 pi u2, in the uniforms' dtype."""
    kind = u1.dtype.type
    log, sincos = (log_ps, sincos_ps) if kind is np.float32 else (_libm_log, _libm_sincos)
    radius = np.sqrt(kind(-2.0) * log(kind(1.0) - u1))  # [0, 1) -> (0, 1] for the log
    sin, cos = sincos(kind(2.0 * math.pi) * u2)
    return radius, sin, cos


_FLOAT32_UNIFORMS = 2**24  # a float32 uniform is k * 2**-24, k < 2**24
_TABULATE_FROM = 2**25  # from this many float32 values on, tabulating every k costs less


def _float32_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """radius, sin and cos for every float32 uniform k * 2**-24 (2**24 values each, 64 MB): the
    same functions, evaluated once per possible input instead of once per draw."""
    u = np.arange(_FLOAT32_UNIFORMS, dtype=np.float32) * np.float32(2.0**-24)
    tables = [np.empty(_FLOAT32_UNIFORMS, dtype=np.float32) for _ in range(3)]
    step = 16 * _BLOCKS_PER_CHUNK
    for start in range(0, _FLOAT32_UNIFORMS, step):
        part = u[start : start + step]
        for table, values in zip(tables, _radius_and_trig(part, part)):
            table[start : start + step] = values
    radius, sin, cos = tables
    return radius, sin, cos


def normal_blocks(u: np.ndarray, mean: float, std: float) -> np.ndarray:
    """Transform 16 k uniforms (float32 or float64) block by block, in their dtype; returns a new
    array of the same length and dtype."""
    kind = u.dtype.type
    fma: Callable[[Any, Any, Any], np.ndarray] = fma_float32 if kind is np.float32 else fma_float64
    mean_, std_ = kind(mean), kind(std)
    tables = _float32_tables() if kind is np.float32 and u.size >= _TABULATE_FROM else None
    blocks = u.reshape(-1, 2, 8)
    out = np.empty_like(blocks)
    for start in range(0, len(blocks), _BLOCKS_PER_CHUNK):
        chunk = blocks[start : start + _BLOCKS_PER_CHUNK]
        u1, u2 = chunk[:, 0].ravel(), chunk[:, 1].ravel()
        if tables is None:
            radius, sin, cos = _radius_and_trig(u1, u2)
        else:  # exact lookups: k = u * 2**24 is an integer below 2**24
            k1, k2 = (u1 * np.float32(2.0**24)).astype(np.int32), (u2 * np.float32(2.0**24)).astype(np.int32)
            radius, sin, cos = tables[0][k1], tables[1][k2], tables[2][k2]
        for half, trig in ((0, cos), (1, sin)):
            n = radius * trig
            # fma(n, std, mean); with std 1 and mean 0 that is n + 0 (which turns -0 into +0)
            z = n + kind(0.0) if std_ == 1 and mean_ == 0 else fma(n, std_, mean_)
            out[start : start + len(chunk), half] = z.reshape(-1, 8)
    return out.reshape(-1)
