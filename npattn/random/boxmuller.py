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


def normal_blocks(u: np.ndarray, mean: float, std: float) -> np.ndarray:
    """Transform 16 k uniforms (float32 or float64) block by block, in their dtype; returns a new
    array of the same length and dtype."""
    kind = u.dtype.type
    log, sincos, fma = (log_ps, sincos_ps, fma_float32) if kind is np.float32 else (_libm_log, _libm_sincos, fma_float64)
    one, minus_two, two_pi, zero = kind(1.0), kind(-2.0), kind(2.0 * math.pi), kind(0.0)
    mean_, std_ = kind(mean), kind(std)
    blocks = u.reshape(-1, 2, 8)
    out = np.empty_like(blocks)
    for start in range(0, len(blocks), _BLOCKS_PER_CHUNK):
        chunk = blocks[start : start + _BLOCKS_PER_CHUNK]
        u1 = (one - chunk[:, 0]).ravel()  # [0, 1) -> (0, 1] for the log
        radius = np.sqrt(minus_two * log(u1))
        sin, cos = sincos(two_pi * chunk[:, 1].ravel())
        for half, trig in ((0, cos), (1, sin)):
            n = radius * trig
            # fma(n, std, mean); with std 1 and mean 0 that is n + 0 (which turns -0 into +0)
            z = n + zero if std_ == 1 and mean_ == 0 else fma(n, std_, mean_)
            out[start : start + len(chunk), half] = z.reshape(-1, 8)
    return out.reshape(-1)
