"""PyTorch's AVX2 float32 log, sin and cos (avx_mathfun.h, Cephes polynomials), in NumPy.

``torch.randn``/``normal_`` on 16 or more float32 elements runs a Box-Muller transform whose
log, sin and cos come from ``avx_mathfun.h`` (Julien Pommier's Cephes-based SSE/AVX code),
compiled with fused multiply-adds. Its results differ from NumPy's float32 ``log``/``sin``/``cos``
in about a third of the elements, so the exact sequence of float32 operations is repeated
here, each ``a * b + c`` the compiler fused done with :func:`fma_float32` (rounded once).
Which pairs were fused was measured against torch (exact over 16M elements), see the tests.

Both functions take and return float32 arrays. ``log_ps`` expects x in (0, 1] (u1 = 1 - u of
the Box-Muller transform); ``sincos_ps`` expects 0 <= x < 2 pi (theta = 2 pi u2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn.random.fma import fma_float32 as _fma_float32

__all__ = ["log_ps", "sincos_ps"]


def fma_float32(a: Any, b: Any, c: Any) -> np.ndarray:
    """A float32 FMA whose result is a normal number or an exact zero (true on these domains)."""
    return _fma_float32(a, b, c, may_underflow=False)

f32 = np.float32
_ONE = f32(1.0)
_SQRTHF = f32(0.707106781186547524)
_LOG_P = [f32(v) for v in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1,
)]  # fmt: skip
_LOG_Q1, _LOG_Q2 = f32(-2.12194440e-4), f32(0.693359375)  # ln 2 = Q2 - Q1, Q2 with 9 bits
_FOPI = f32(1.27323954473516)  # 4 / pi
_DP1, _DP2, _DP3 = f32(-0.78515625), f32(-2.4187564849853515625e-4), f32(-3.77489497744594108e-8)  # -pi/4 in 3 parts
_SIN_P = [f32(v) for v in (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)]
_COS_P = [f32(v) for v in (2.443315711809948e-005, -1.388731625493765e-003, 4.166664568298827e-002)]


def log_ps(x: np.ndarray) -> np.ndarray:
    """log256_ps: natural log of float32 x in (0, 1] (normal numbers), as PyTorch's AVX2 code."""
    bits = x.view(np.int32)
    # x = m * 2**e with m in [0.5, 1): the exponent, then the mantissa with 0.5's exponent
    e = ((bits >> 23) - 0x7F).astype(f32) + _ONE
    m = ((bits & ~0x7F800000) | 0x3F000000).view(f32)
    # if m < sqrt(1/2): e -= 1, x = m + m - 1, else x = m - 1 (all exact)
    small = m < _SQRTHF
    x = (m - _ONE) + np.where(small, m, f32(0.0))
    e = e - small.astype(f32)
    z = x * x
    y = np.full_like(x, _LOG_P[0])
    for p in _LOG_P[1:]:
        y = fma_float32(y, x, p)  # y = y * x + p_k (fused)
    y = y * x
    y = fma_float32(y, z, e * _LOG_Q1)  # y = y * z + e * q1: the first product fused
    y = y - z * f32(0.5)  # fused in torch, but z * 0.5 is exact
    x = x + y
    return x + e * _LOG_Q2  # fused in torch, but e * q2 is exact (|e| < 2**7, q2 has 9 bits)


def sincos_ps(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sincos256_ps: (sin x, cos x) of float32 x in [0, 2 pi), as PyTorch's AVX2 code."""
    j = (x * _FOPI).astype(np.int32)  # truncation; x >= 0
    j = (j + 1) & ~1  # j = (j + 1) & ~1: the even octant
    y = j.astype(f32)
    sin_negative = (j & 4) != 0
    cos_negative = (~(j - 2) & 4) != 0
    use_sin_poly = (j & 2) == 0  # the polynomial the sine takes (the cosine takes the other one)
    # extended-precision reduction x = ((x - y DP1) - y DP2) - y DP3, each step fused;
    # y * DP1 and y * DP2 are exact (y is an even integer <= 8, DP1 has 4 bits, DP2 9)
    x = x + y * _DP1
    x = x + y * _DP2
    x = fma_float32(y, _DP3, x)
    z = x * x
    # cosine polynomial on [-pi/4, pi/4]: 1 - z/2 + z**2 (c0 z**2 + c1 z + c2)
    yc = fma_float32(np.full_like(z, _COS_P[0]), z, _COS_P[1])
    yc = fma_float32(yc, z, _COS_P[2])
    yc = fma_float32(yc * z, z, -(z * f32(0.5)))  # y * z * z - z * 0.5, the second product fused
    yc = yc + _ONE
    # sine polynomial: x + x z (s0 z**2 + s1 z + s2)
    ys = fma_float32(np.full_like(z, _SIN_P[0]), z, _SIN_P[1])
    ys = fma_float32(ys, z, _SIN_P[2])
    ys = fma_float32(ys * z, x, x)
    sin = np.where(use_sin_poly, ys, yc)
    cos = np.where(use_sin_poly, yc, ys)
    return np.where(sin_negative, -sin, sin), np.where(cos_negative, -cos, cos)
