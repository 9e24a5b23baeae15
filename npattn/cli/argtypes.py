"""The command line's argument types: numbers as a command line means them, in plain ASCII
(Python's int() and float() also take '5_0' as 50, ' 5', and other scripts' digits)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

__all__ = ["COUNT", "SEED", "decimal", "integer", "plain_number", "whole"]

_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def plain_number(text: str) -> float | None:
    """``text`` as a float if it is a decimal number in plain ASCII (``0.05``, ``-1``, ``4e-4``,
    ``.5``; ``nan`` and ``inf`` too, for the option's own check to refuse by name), else None."""
    return float(text) if isinstance(text, str) and _NUMBER.fullmatch(text) else None


def decimal(text: str) -> float:
    """An argparse type: a decimal number (``plain_number``)."""
    value = plain_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number (digits 0-9, e.g. 0.05 or 4e-4), got {text!r}")
    if value == 0 and re.search(r"[1-9]", text.split("e")[0].split("E")[0]):
        raise argparse.ArgumentTypeError(f"{text!r} is too small for a float: it would be read as 0")
    return value


def whole(text: str) -> int:
    """An argparse type: an integer in plain ASCII digits, with an optional '-' (its range checked by the option)."""
    if not re.fullmatch(r"-?[0-9]+", text):
        raise argparse.ArgumentTypeError(f"expected an integer (digits 0-9), got {text!r}")
    return int(text)


def integer(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]; ``what`` says why there is a ceiling."""

    def parse(text: str) -> int:
        value = whole(text)
        if value < low:
            kind = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise argparse.ArgumentTypeError(f"must be {kind}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}{what}, got {value}")
        return value

    return parse


SEED = integer(0, 2**32 - 1, " (the tasks' and inputs' seeds lie in [0, 2**32))")
COUNT = integer(0)
