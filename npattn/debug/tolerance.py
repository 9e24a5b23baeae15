"""How close is close enough, in one place for the debugging tools: tolerances judged relative to
the magnitude of what is compared, and refused when they are negative, NaN, or so wide that the
check could not fail.

Forward checks (check_rows, diagnose, compare) pass when |output - reference| <= atol + rtol *
max|reference|; by default atol is 0 and rtol 1e-5, so the judgement is relative: scaling x and the
weights scales what is allowed (an all-zero output never passes for outputs of 1e-7). A tolerance
under which an output off by 0.1% (``FORWARD_DETECTS``) would pass is refused with a ConfigError.

A float32 output (atol unset) is also allowed float32's documented rounding (docs/errors.md,
"float32 against float64"): ``FLOAT32_BOUND * (1 + S) * max|values|``, S the largest |scaled
score|, capped at a fifth of ``FORWARD_DETECTS`` (0.02%) of the output's magnitude so that an
output off by 0.1%, or one entry off by 0.1% of itself when it is above a fifth of the largest,
still fails (npattn's own float32 output errs by 1e-5 to 3e-5 of the magnitude at S up to 3e4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npattn._checks import check_finite
from npattn.errors import ConfigError

__all__ = ["FLOAT32_BOUND", "FORWARD_DETECTS", "FORWARD_RTOL", "allowed_error", "check_tolerances", "float32_allowance"]
__all__ += ["largest", "matches"]

FORWARD_DETECTS = 1e-3
"""Every forward check must be able to fail an output off by this relative amount (0.1%)."""

FORWARD_RTOL = 1e-5
"""The default relative tolerance of the forward checks: float32's rounding (1.2e-7, a few
operations deep) passes with a margin of about 30; every catalogued mistake at the book's scale is
off by far more."""


FLOAT32_BOUND = 1e-5
"""float32 agrees with float64 within FLOAT32_BOUND * (1 + S) * scale (S the largest |scaled score|;
docs/errors.md, "float32 against float64"; measured worst 7.8e-8 for outputs)."""


def float32_allowance(
    output: np.ndarray, queries: np.ndarray, keys: np.ndarray, values: np.ndarray, reference: np.ndarray,
    *, causal: bool = False, num_heads: int = 1,
) -> float:  # fmt: skip
    """What float32 rounding may add to a correct ``output`` (0.0 unless its dtype is float32):
    ``FLOAT32_BOUND * (1 + S) * max|values|``, S the largest |scaled score| over the entries the
    causal mask keeps, per head (queries, keys, values (..., n, d_out), heads side by side in
    d_out); at most a fifth of ``FORWARD_DETECTS`` times max|reference|."""
    if np.asarray(output).dtype != np.float32 or queries.shape[-2] == 0:
        return 0.0
    n, d_out = queries.shape[-2:]
    head_dim = d_out // num_heads
    keep = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    S = 0.0
    for h in range(num_heads):
        c = slice(h * head_dim, (h + 1) * head_dim)
        scores = queries[..., c] @ np.swapaxes(keys[..., c], -1, -2) / math.sqrt(head_dim)
        S = max(S, largest(np.where(keep, scores, 0.0)))
    return min(FLOAT32_BOUND * (1 + S) * largest(values), FORWARD_DETECTS / 5 * largest(reference))


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
            f"{detects:.2%}, all zeros or sign-flipped would pass; use atol < {(detects - rtol) * scale:.2g} "
            "(or leave it unset: the default judges relative to the values)"
        )
    return allowed


def matches(output: np.ndarray, expected: np.ndarray, rtol: float = FORWARD_RTOL) -> bool:
    """Same shape, finite, and |output - expected| <= rtol * max|expected| everywhere: the forward
    checks' default judgement, relative to the values."""
    output, expected = np.asarray(output), np.asarray(expected)
    if output.shape != expected.shape or not np.all(np.isfinite(output)):
        return False
    return bool(np.all(np.abs(output - expected) <= rtol * largest(expected)))
