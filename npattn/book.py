"""The example of chapter 3: "Your journey starts with one step", six tokens of three dimensions."""

from __future__ import annotations

import numpy as np

from npattn._checks import check_float_dtype

__all__ = ["BOOK_TOKENS", "book_batch", "book_inputs"]

BOOK_TOKENS = ("Your", "journey", "starts", "with", "one", "step")

_INPUTS = [
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
]


def book_inputs(dtype: type = np.float32) -> np.ndarray:
    """The book's ``inputs`` tensor, shape (6, 3), float32 like ``torch.tensor`` by default.

    Raises:
        DTypeError: ``dtype`` is not a floating dtype.
    """
    return np.array(_INPUTS, dtype=check_float_dtype(dtype, "book_inputs dtype"))


def book_batch(dtype: type = np.float32) -> np.ndarray:
    """``torch.stack((inputs, inputs), dim=0)``: shape (2, 6, 3)."""
    x = book_inputs(dtype)
    return np.stack((x, x), axis=0)
