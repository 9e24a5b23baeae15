"""``compare`` of two float64 npattn modules on the book's float32 inputs judged them at float32's
rtol (x's dtype decided), so a weight 1e-7 off agreed; a float64 module converts x to float64
exactly, so both sides compute in float64 and are judged at float64's rtol, as the docs say."""

import numpy as np
import pytest

import npattn


@pytest.mark.parametrize("x_dtype", [np.float32, np.float64])
def test_a_small_weight_difference_is_found_whatever_x_dtype(x_dtype):
    a = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    b = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    x = npattn.book_inputs().astype(x_dtype)
    assert npattn.compare(a, b, x).first_divergence is None
    b.W_value.data[0, 0] += 1e-7
    assert npattn.compare(a, b, x).first_divergence == "values"
