"""A user's forward must leave what it is given as it was: ``npattn check`` hands it copies, so an
in-place edit (``W_query *= 0``) harms nothing there, but on a real model it would change the
weights. ``call_keeping_inputs`` runs the function on copies and refuses such an edit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from npattn.errors import ConfigError

__all__ = ["call_keeping_inputs", "edited_names"]


def call_keeping_inputs(name: str, fn: Callable[..., Any], x: np.ndarray, weights: Mapping[str, np.ndarray]) -> Any:
    """``fn(x, *weights.values())`` on copies; what it returns.

    Raises:
        ConfigError: ``fn`` changed x or a weight in place, naming them.
    """
    given_x, given = x.copy(), {n: np.array(w, copy=True) for n, w in weights.items()}
    out = fn(given_x, *given.values())
    edited = edited_names(given, weights) + (["x"] if not _same(given_x, x) else [])
    if edited:
        raise ConfigError(
            f"{name} changed its input(s) {', '.join(edited)} in place: a forward must leave what it is given as it "
            "was (on a model it would change the weights or the caller's data); compute into new arrays"
        )
    return out


def edited_names(held: Mapping[str, Any], given: Mapping[str, np.ndarray]) -> list[str]:
    """The names whose array in ``held`` no longer equals the one in ``given`` (NaN equal to NaN)."""
    return [n for n, w in given.items() if not _same(np.asarray(held[n]), w)]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
