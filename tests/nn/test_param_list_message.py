"""A list assigned to a float32 parameter's .data: the error says a list was converted to
float64 (not merely "has dtype float64"); a to() that changes nothing keeps the forward."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import DTypeError


def test_a_list_assigned_to_a_float32_parameter_is_named_as_a_list() -> None:
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    m.W_query.data = [[1.0, 0.0]] * 3
    with pytest.raises(
        DTypeError,
        match=r"parameter W_query was assigned a list, which NumPy converted to float64; expected float32 .*"
        r"np\.asarray\(value, dtype=np\.float32\)",
    ):
        m(npattn.book_inputs())
    m.W_query.data = np.asarray([[1.0, 0.0]] * 3, dtype=np.float32)  # the advice works
    assert m(npattn.book_inputs()).shape == (6, 2)
    m.W_query.data = np.ones((3, 2))  # an array of another dtype keeps the other message
    with pytest.raises(DTypeError, match=r"has dtype float64, expected float32 .*\.to\(float64\)"):
        m(npattn.book_inputs())


@pytest.mark.parametrize("how", ["to", "float", "cpu_and_dtype"])
def test_a_to_that_changes_nothing_keeps_the_forward(how: str) -> None:
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1)
    out = m(npattn.book_inputs()[None])
    {"to": lambda: m.to(np.float32), "float": m.float, "cpu_and_dtype": lambda: m.to("cpu", np.float32)}[how]()
    assert m.backward(np.ones_like(out)).shape == (1, 6, 3)
