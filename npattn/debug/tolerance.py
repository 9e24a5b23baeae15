"""How close is close enough, in one place for the debugging tools: tolerances judged relative to
the magnitude of what is compared, and refused when they are negative, NaN, or so wide that the
check could not fail.

Forward checks (check_rows, diagnose) judge each output column j on its own scale: they pass when
|output[..., j] - reference[..., j]| <= atol + rtol * max|reference[..., j]| (a context vector's
column j is an average of column j of the values, so its errors scale with that column, not with
the output's largest entry: a wrong column of small values must fail next to large ones). By default
atol is 0 and rtol 1e-5, so the judgement is relative: scaling x and the weights scales what is
allowed (an all-zero output never passes for outputs of 1e-7). ``compare`` judges each stage
relative to its largest magnitude. A tolerance under which an output off by 0.1%
(``FORWARD_DETECTS``) would pass is refused with a ConfigError.

An output's own rounding (atol unset) is also allowed, column by column: ``FLOAT32_BOUND * (1 + S) *
max|values[..., j]|`` for float32 (docs/errors.md, "float32 against float64"), S the largest |scaled
score|, the bound scaled by the dtype's epsilon for float16 (and float64), capped at a fifth of
``FORWARD_DETECTS`` (0.02%) of the column's magnitude (half of it, 0.05%, for float16, whose own
rounding is 0.049%) so that an output off by 0.1%, or one entry off by 0.1% of itself when it is
above a fifth of its column's largest, still fails (npattn's own float32 output errs by 1e-5 to
3e-5 of the magnitude at S up to 3e4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npattn._checks import check_finite, from_tensor
from npattn._scalars import bound
from npattn.errors import ConfigError

__all__ = ["FLOAT32_BOUND", "FORWARD_DETECTS", "FORWARD_RTOL", "allowed_error", "check_tolerances", "column_allowed"]
__all__ += ["FLOAT16_ROUNDING", "column_largest", "largest", "matches", "rounding_allowance"]
__all__ += ["FORWARD_RTOL_FLOAT64", "forward_rtol"]

FORWARD_DETECTS = 1e-3
"""Every forward check must be able to fail an output off by this relative amount (0.1%)."""

FORWARD_RTOL = 1e-5
"""The default relative tolerance of the forward checks: float32's rounding (1.2e-7, a few
operations deep) passes with a margin of about 30; every catalogued mistake at the book's scale is
off by far more."""


FORWARD_RTOL_FLOAT64 = 1e-9
"""The default relative tolerance of the forward checks for a float64 output of float64 x and
weights (with atol and rtol unset): float64's rounding (2.2e-16, a few operations deep) passes
with a margin of about 10**5, and an output off by 1e-6 (an eps of 1e-5 added to the softmax
denominator) fails, where ``FORWARD_RTOL`` (float32's precision) would pass it."""


def forward_rtol(rtol: float | None, atol: float | None, inputs_float64: bool, *outputs: Any) -> float:
    """The forward checks' rtol: the caller's ``rtol`` when given; unset (None), ``FORWARD_RTOL_FLOAT64``
    when atol is unset too, the inputs (x and the weights) are float64 and so is every output, else
    ``FORWARD_RTOL``. A float64 output of float32 inputs (``x32 @ W32 / np.sqrt(2.0)`` is float64 in
    NumPy 2) carries float32's precision and keeps ``FORWARD_RTOL``."""
    if rtol is not None:
        return rtol
    if atol is None and inputs_float64 and outputs and all(getattr(o, "dtype", None) == np.float64 for o in outputs):
        return FORWARD_RTOL_FLOAT64
    return FORWARD_RTOL


FLOAT32_BOUND = 1e-5
"""float32 agrees with float64 within FLOAT32_BOUND * (1 + S) * scale (S the largest |scaled score|;
docs/errors.md, "float32 against float64"; measured worst 7.8e-8 for outputs)."""


FLOAT16_ROUNDING = FORWARD_DETECTS / 2
"""What a float16 output may be off by, relative to its column's largest value: float16 rounds to
within 2**-11 = 0.049% of each normal number, and an output off by 0.1% still fails."""


def rounding_allowance(
    output: np.ndarray, queries: np.ndarray, keys: np.ndarray, values: np.ndarray, reference: np.ndarray,
    *, causal: bool = False, num_heads: int = 1,
) -> np.ndarray | float:  # fmt: skip
    """What its dtype's rounding may add to a correct ``output``, per output column (d_out,): 0.0
    unless it is float16, float32 or float64. ``FLOAT32_BOUND * (1 + S) * max|values[..., j]|`` for
    float32 (the bound scaled by the dtype's epsilon for the others), S the largest |scaled score|
    over the entries the causal mask keeps, per head (queries, keys, values (..., n, d_out), heads
    side by side in d_out); at most a fifth of ``FORWARD_DETECTS`` (half for float16) times
    max|reference[..., j]|."""
    dtype = np.asarray(output).dtype
    if dtype not in (np.float16, np.float32, np.float64) or queries.shape[-2] == 0:
        return 0.0
    n, d_out = queries.shape[-2:]
    head_dim = d_out // num_heads
    keep = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    S = 0.0
    for h in range(num_heads):
        c = slice(h * head_dim, (h + 1) * head_dim)
        scores = queries[..., c] @ np.swapaxes(keys[..., c], -1, -2) / math.sqrt(head_dim)
        S = max(S, largest(np.where(keep, scores, 0.0)))
    bound = FLOAT32_BOUND * float(np.finfo(dtype).eps / np.finfo(np.float32).eps)
    cap = FLOAT16_ROUNDING if dtype == np.float16 else FORWARD_DETECTS / 5
    return np.minimum(bound * (1 + S) * column_largest(values), cap * column_largest(reference))


def column_largest(a: np.ndarray) -> np.ndarray:
    """max |entry| of each column (the last axis) over the finite entries: (a.shape[-1],)."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.where(np.isfinite(a), np.abs(a), 0.0)
    if a.shape[-1] == 0:
        return np.zeros(0)
    return np.max(finite.reshape(-1, a.shape[-1]), axis=0, initial=0.0)


def column_allowed(
    reference: np.ndarray, atol: float | None, rtol: float, rounding: np.ndarray | float = 0.0
) -> np.ndarray | float:
    """The forward checks' allowance per column of ``reference`` (its last axis): max(atol + rtol *
    max|reference[..., j]|, rounding[j]); a single number for a reference of no columns, or of
    another width than ``rounding`` (a candidate shaped unlike the output)."""
    if np.ndim(reference) == 0 or (np.ndim(rounding) and np.shape(rounding)[0] != np.shape(reference)[-1]):
        return max((atol or 0.0) + rtol * largest(reference), float(np.max(rounding, initial=0.0)))
    return np.maximum((atol or 0.0) + rtol * column_largest(reference), rounding)


DEFAULT_RTOL = 1e-6
"""The backward checks' default relative tolerance (float64 gradients)."""

FLOAT32_RTOL = 1e-4
"""How close a gradient computed in float32 must be (epsilon 1.2e-7, a few operations deep),
relative to each gradient's magnitude; every catalogued mistake is off by far more."""


def low_precision(value: Any) -> bool:
    """True for an array (or torch tensor) of float32 or float16."""
    arr = from_tensor(value) if value is not None else None
    return isinstance(arr, np.ndarray) and arr.dtype.kind == "f" and arr.dtype.itemsize < 8


def check_tolerances(atol: Any, rtol: Any, who: str, detects: float = FORWARD_DETECTS) -> tuple[float | None, float]:
    """(atol, rtol) as floats (atol None stays None: relative only). Refuses NaN, inf, negative
    values and an rtol >= ``detects``.

    Raises:
        ConfigError: naming ``who`` and the value.
    """
    a = None if atol is None else check_finite(atol, f"{who}: atol")
    r = check_finite(rtol, f"{who}: rtol")
    if (a is not None and a < 0) or r < 0:
        raise ConfigError(f"{who}: atol and rtol must be >= 0, got atol={atol}, rtol={rtol}")
    if r >= detects:
        raise ConfigError(
            f"{who}: rtol must be below {detects:g}, got {r:g}: with it a result off by {detects:.2%} would pass"
        )
    return a, r


def largest(*arrays: np.ndarray) -> float:
    """max |entry| over the finite entries of ``arrays`` (0.0 when there are none)."""
    return max((float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in arrays), default=0.0)


def allowed_error(
    reference: np.ndarray, atol: float | None, rtol: float, who: str, detects: float = FORWARD_DETECTS
) -> float:
    """atol + rtol * max|reference| (atol None: 0). Refuses an allowance under which a result off by
    ``detects`` of the reference's largest magnitude (or all zeros, or sign-flipped) would pass.

    Raises:
        ConfigError: the allowance is that wide (names the magnitude and the widest atol accepted).
    """
    scale = largest(reference)
    allowed = (atol or 0.0) + rtol * scale
    if scale > 0.0 and allowed >= detects * scale:
        raise ConfigError(
            f"{who}: atol={atol:g} is too wide for these values (the largest is {scale:.3g}): a result off by "
            f"{detects:.2%}, all zeros or sign-flipped would pass; "
            f"use atol < {bound((detects - rtol) * scale, below=True)} "
            "(or leave it unset: the default judges relative to the values)"
        )
    return allowed


def matches(output: np.ndarray, expected: np.ndarray, rtol: float = FORWARD_RTOL) -> bool:
    """Same shape, finite, and |output - expected| <= rtol * max|expected[..., j]| in every column j
    (a float16 output: up to ``FLOAT16_ROUNDING`` of it, float16's own rounding): the forward checks'
    default judgement, relative to each column's values."""
    output, expected = np.asarray(output), np.asarray(expected)
    if output.shape != expected.shape or not np.all(np.isfinite(output)):
        return False
    rounding = FLOAT16_ROUNDING * column_largest(expected) if output.dtype == np.float16 and expected.ndim else 0.0
    return bool(np.all(np.abs(output - expected) <= column_allowed(expected, None, rtol, rounding)))
