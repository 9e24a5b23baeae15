"""The one check of a resumed run's settings against its checkpoint (``train_task`` and
``npattn train``; ``run_lm`` and ``--task lm``).

A setting given on resume must equal the stored one exactly as a fresh run would use it: a float
setting is compared as the Python float the run computes with (``np.float32(0.05)`` is
0.05000000074505806, which a fresh run trains with, so it contradicts a checkpoint's 0.05), an
integer as its exact int.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from npattn.errors import ConfigError
from npattn.optim.checks import as_number

__all__ = ["check_resumed_settings", "fresh_value", "plain_setting"]


def plain_setting(value: Any, name: str) -> Any:
    """A checked run setting as the plain Python value a checkpoint stores (JSON's types): a NumPy
    bool as bool, a NumPy integer as int, a NumPy float as float, a str subclass (``np.str_``) as
    str; None and Python's own values unchanged. Runs call it where they check their settings,
    before the first step, so what a run saves is what it checked.

    Raises:
        ConfigError: naming ``name``, for any other value (it could not be saved).
    """
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        return str(value)
    raise ConfigError(
        f"{name} must be a plain bool, int, float or str (what a checkpoint stores), got {value!r} "
        f"({type(value).__name__})"
    )


def fresh_value(value: Any) -> Any:
    """The value a fresh run uses for a setting given as ``value``: a NumPy scalar, 0-d array or 0-d
    tensor as its Python number, a non-integer real number as a Python float; others unchanged."""
    value = as_number(value)
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return float(value)
    return value


def _same(a: Any, b: Any) -> bool:
    """Exact equality that neither rounds a float to float32 (NumPy compares ``np.float32(0.05) ==
    0.05`` in float32) nor an int above 2**53 to a float; True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
        return int(a) == int(b)
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real):
        try:
            return float(a) == float(b)
        except OverflowError:
            return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # an array's elementwise answer
        return False


def check_resumed_settings(given: Mapping[str, Any], stored: Mapping[str, Any], option: Callable[[str], str]) -> None:
    """Every setting ``given`` equals the ``stored`` one as a fresh run would use it.

    ``option(name)`` is how the message names a setting (``--lr``).

    Raises:
        ConfigError: naming every setting that differs: the value given, the one a fresh run
            would use when that reads otherwise, and the checkpoint's.
    """
    clash = []
    for name, value in given.items():
        fresh, saved = fresh_value(value), stored.get(name)
        if not _same(fresh, saved):
            used = f" (a run uses {fresh!r})" if repr(fresh) != repr(value) else ""
            clash.append(f"{option(name)} {value!r}{used} (checkpoint: {saved!r})")
    if clash:
        raise ConfigError("--resume continues the stored run; these options differ from it: " + ", ".join(clash))
