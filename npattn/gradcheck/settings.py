"""What the gradient checks refuse before comparing anything (settings, eps, the forward's output),
and the default atol (the finite differences' rounding noise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from npattn._checks import check_bool, check_finite, check_nonnegative_int, check_positive_int, from_tensor
from npattn._scalars import bound
from npattn.errors import ConfigError, GradcheckError
from npattn.gradcheck.report import DETECTS, GradcheckReport

__all__ = ["DIFFERENCE_NOISE", "MIN_EPS", "difference_noise"]

DIFFERENCE_NOISE = 10.0
"""How many times the finite differences' rounding noise the default atol allows (``difference_noise``)."""

MIN_EPS = 1e-10
"""The smallest eps, relative to the largest magnitude perturbed (and absolute below magnitude 1)."""


def difference_noise(out: np.ndarray, G: np.ndarray, eps: float) -> float:
    """The rounding noise of a central difference of L = sum(out * G): ``DIFFERENCE_NOISE`` times
    float64's epsilon (2.2e-16) times sum|out * G|, over eps. Part of gradcheck's default atol (a
    large output next to a small one makes the small tensor's differences that noisy)."""
    return DIFFERENCE_NOISE * float(np.finfo(np.float64).eps) * float(np.sum(np.abs(out * G))) / eps


def _precision_hint(out: Any) -> str:
    """Why a correct backward may fail here: a forward output in float32 (or lower), or float64
    values that are all float32 numbers (computed in float32 inside); "" otherwise."""
    arr = np.asarray(out)
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 8:
        inside = f"returns {arr.dtype}"
    elif (
        arr.dtype == np.float64
        and np.any(arr != np.round(arr))
        and np.array_equal(arr, arr.astype(np.float32))
        and not np.array_equal(arr, arr.astype(np.float16))  # short fractions (2.25): exact in float64 too
    ):
        inside = "returns float64 values that are all float32 numbers (float32 inside?)"
    else:
        return ""
    return (
        f"note: the forward {inside}: finite differences of float32 are rounding noise, so a correct "
        "backward fails here; gradcheck needs the forward to compute in float64"
    )


MAX_DIRECTIONS = 10_000
"""fast_mode's largest ``n_directions``: each is two forward passes and a random tensor of the input's size."""


DIRECTIONS = 4
"""fast_mode's ``n_directions`` when none is given."""


def _check_settings(
    eps: float, atol: float, rtol: float, n_directions: int | None, seed: int, **flags: bool
) -> int:
    """Refuse settings under which a check could not fail (or could not pass); returns fast_mode's
    number of directions (``DIRECTIONS`` when none is given)."""
    if not check_finite(eps, "eps") > 0:
        raise ConfigError(f"eps must be > 0, got {eps}")
    if check_finite(atol, "atol") < 0 or check_finite(rtol, "rtol") < 0:
        raise ConfigError(f"atol and rtol must be >= 0, got atol={atol}, rtol={rtol}")
    if rtol >= DETECTS:
        raise ConfigError(
            f"rtol must be below {DETECTS:g}, got {rtol:g}: with it a gradient off by 0.01% (x 1.0001) would pass"
        )
    check_nonnegative_int(seed, "seed")
    for name, value in flags.items():
        check_bool(value, name)
    if n_directions is None:
        return DIRECTIONS
    if check_positive_int(n_directions, "n_directions") > MAX_DIRECTIONS:
        raise ConfigError(
            f"n_directions must be at most {MAX_DIRECTIONS} (each direction is two forward passes; for more, "
            f"check every entry with fast_mode=False), got {n_directions}"
        )
    if not flags.get("fast_mode"):  # it was silently ignored
        raise ConfigError(
            f"n_directions={n_directions} applies to fast_mode=True (random directions); without it every "
            "element is checked: pass fast_mode=True, or leave n_directions out"
        )
    return n_directions


def _check_eps(eps: float, perturbed: Sequence[np.ndarray]) -> float:
    """Refuse an eps too small for float64 at the magnitudes it perturbs (see the module docstring);
    returns the smallest eps allowed there."""
    largest = max((float(np.max(np.abs(a), initial=0.0)) for a in perturbed), default=0.0)
    smallest = MIN_EPS * max(1.0, largest)
    if eps < smallest:
        raise ConfigError(
            f"eps={eps:g} is too small for float64 at these magnitudes (the largest is {largest:.3g}): rounding "
            f"x + eps errs by up to 1.1e-16 |x|, which swamps the numerical gradient; "
            f"use eps >= {bound(smallest, below=False)} "
            f"({MIN_EPS:g} times the largest magnitude, at least {MIN_EPS:g})"
        )
    return smallest


def _check_output(out: Any, who: str) -> np.ndarray:
    """The forward's output as an array of floats. Refuses anything else (a tuple, None, integers:
    L = sum(out * G) needs floats, and integers are piecewise constant, so their finite differences
    are 0) and an output holding NaN or inf: no numerical gradient can be taken through it.

    Raises:
        GradcheckError: not an ndarray (a float, or a torch tensor) of floating-point numbers, naming
            what it is.
        ConfigError: NaN or inf in it.
    """
    out = from_tensor(out)  # a torch tensor as its values
    if not isinstance(out, (np.ndarray, np.floating, float)):
        hint = ""
        if isinstance(out, tuple):
            hint = " (a forward that returns (out, cache) is a stage pair: check it with gradcheck_stage)"
        raise GradcheckError(
            f"{who}: the forward must return an ndarray of floats (the check differentiates "
            f"L = sum(output * G)), got {type(out).__name__}{hint}"
        )
    arr = np.asarray(out)
    if arr.dtype.kind != "f":
        raise GradcheckError(
            f"{who}: the forward must return floating-point numbers, got an output of dtype {arr.dtype}: "
            "an output of integers (or booleans) is piecewise constant, so its finite differences are 0 "
            "and no gradient can be compared; return floats"
        )
    if not np.all(np.isfinite(arr)):
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        advice = "check the forward first"
        if np.all(np.isfinite(arr) | np.isneginf(arr)):  # -inf only: masked scores, by design
            advice = (
                "those entries are -inf, as masked scores are by design: check the mask stage together with the "
                "softmax after it (their output is finite), e.g. with F.attention_forward / attention_backward"
            )
        raise ConfigError(
            f"{who}: the forward output is not finite ({bad} of {arr.size} entries are NaN or inf), "
            f"so no gradient can be compared; {advice}"
        )
    return arr


def _new_report(out: Any, G: np.ndarray, eps: float, atol: float | None, rtol: float) -> GradcheckReport:
    """The report, with the default atol (None): 1e-8 or, when larger, ``difference_noise``."""
    user_atol = atol is not None
    noise = difference_noise(np.asarray(out, dtype=np.float64), G, eps)
    if atol is None:
        atol = max(1e-8, noise)
    hint = _precision_hint(out)
    report = GradcheckReport(eps=eps, atol=atol, rtol=rtol, note=hint, precision=hint, user_atol=user_atol)
    report.noise = None if user_atol else noise
    report.rounding = noise
    return report


def _check_same(first: np.ndarray, second: np.ndarray, who: str) -> None:
    """Two forwards of the same input must agree: finite differences of a random forward are noise.

    Raises:
        ConfigError: naming the largest difference.
    """
    if first.shape != second.shape or not np.array_equal(first, second):
        diff = float(np.max(np.abs(first - second))) if first.shape == second.shape else float("inf")
        raise ConfigError(
            f"{who}: two forwards of the same input differ (by up to {diff:.3g}): the forward is random (np.random, "
            "an unfixed dropout mask) or keeps state between calls (a counter, a running value), so its finite "
            "differences are noise; make it deterministic first"
        )
