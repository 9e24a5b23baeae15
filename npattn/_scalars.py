"""Checks of single settings: finite numbers, positive and non-negative ints, seeds, flags and
probabilities, each returning the plain Python value or raising ConfigError that names it."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from npattn.errors import ConfigError

__all__ = [
    "bound",
    "check_bool",
    "check_finite",
    "check_nonnegative_int",
    "check_positive_int",
    "check_probability",
    "check_seed",
    "finite_float",
    "shown",
]


def finite_float(value: Any) -> float | None:
    """``float(value)`` for a finite real number (not bool), else None: also for an int too large
    for a float (10**400), where ``float()`` raises OverflowError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def shown(value: Any) -> str:
    """``repr(value)``, but an int of more than 30 digits by its size (10**5000 cannot even be printed)."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


def check_finite(value: Any, name: str) -> float:
    """Return ``value`` as float if it is a finite real number (not bool), else raise ConfigError."""
    number = finite_float(value)
    if number is None:
        what = "a finite number, not a bool" if isinstance(value, (bool, np.bool_)) else "a finite number"
        raise ConfigError(f"{name} must be {what}, got {shown(value)}")
    return number


def check_positive_int(value: Any, name: str) -> int:
    """Return ``value`` as int if it is a positive integer (not bool), else raise ConfigError."""
    return _check_int(value, name, 1, "a positive integer")


def check_nonnegative_int(value: Any, name: str) -> int:
    """Return ``value`` as int if it is an integer >= 0 (not bool), else raise ConfigError."""
    return _check_int(value, name, 0, "an integer >= 0")


def _check_int(value: Any, name: str, low: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    if value < low:
        raise ConfigError(f"{name} must be {what}, got {value}")
    return int(value)


def check_seed(value: Any, name: str = "seed") -> int:
    """Return ``value`` as int if it is an integer in [0, 2**32) (a Python int or any NumPy integer
    type, not bool): the seeds of npattn's tasks and runs, the range of ``--seed``.

    Raises:
        ConfigError: naming ``name``, the range and the value.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not 0 <= int(value) < 2**32:
        raise ConfigError(f"{name} must be an integer in [0, 2**32), got {value!r}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` as bool if it is a bool (or NumPy bool, or the integer 0 or 1), else raise ConfigError."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise ConfigError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def check_probability(value: Any, name: str) -> float:
    """Return ``value`` as float if it lies in [0, 1), else raise ConfigError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number in [0, 1), got {value!r} ({type(value).__name__})")
    number = finite_float(value)
    if number is None or not 0.0 <= number < 1.0:
        raise ConfigError(f"{name} must lie in [0, 1), got {shown(value)}")
    return number


def bound(value: float, *, below: bool) -> str:
    """``value`` on two significant digits, rounded to the side a caller's setting must stay on: down
    for an upper bound (``below``: "use atol < 0.0061" where the bound is 0.0060615), up for a lower
    bound ("use eps >= 1.3e-06" where it is 1.234e-06), so that following the advice is accepted."""
    if not math.isfinite(value) or value <= 0.0:
        return f"{value:.2g}"
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    if step == 0.0 or not math.isfinite(step) or not math.isfinite(value / step):  # subnormal, or near the top
        return repr(value)
    for nudge in range(3):  # the product can round to the wrong side of value: one step further
        rounded = (math.floor(value / step) - nudge) * step if below else (math.ceil(value / step) + nudge) * step
        text = f"{rounded:.2g}"
        if math.isfinite(float(text)) and ((float(text) <= value) if below else (float(text) >= value)):
            return text
    return f"{value!r}"
