"""The checks every tokenizer makes of what it is given: ``encode`` takes a str, ``decode`` a flat
sequence of integer ids inside the vocabulary (``npattn.train.tokenizers`` and ``npattn.train.bpe``
share them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn.errors import ConfigError

__all__ = ["check_ids", "check_text"]


def check_text(text: Any, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ConfigError(f"{name} must be a str, got {type(text).__name__}")
    return text


def check_ids(ids: Any, vocab_size: int) -> list[int]:
    """Token ids as a flat list of Python ints in [0, vocab_size).

    Raises:
        ConfigError: a non-integer id, an id outside the vocabulary, or more than one axis.
    """
    arr = np.asarray(ids)
    if arr.size == 0:
        return []
    if arr.ndim == 1 and arr.dtype == object and all(type(i) is int for i in arr):  # ints past int64
        bad = next(i for i in arr if not 0 <= i < vocab_size)
        raise ConfigError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ConfigError(
            f"token ids must be a flat sequence of integers, got shape {arr.shape} dtype {arr.dtype} "
            "(decode one sequence at a time: ids[0] of a (1, n) batch)"
        )
    low, high = int(arr.min()), int(arr.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ConfigError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
    return [int(i) for i in arr]
