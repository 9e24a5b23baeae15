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


def test_modules_without_parameters_keep_the_x_dtype_rule():
    """Two parameterless modules doing float32 arithmetic in a different order: judged at float32's
    rtol on float32 x (the float64 rule needs float64 parameters to know they compute in float64)."""
    W = {k: np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32) for k in "qkv"}

    class Plain(npattn.Module):
        def __init__(self, order):
            super().__init__()
            self.order = order

        def forward(self, x):
            q, k, v = x @ W["q"], x @ W["k"], x @ W["v"]
            s = (q @ k.T) / np.float32(np.sqrt(2.0)) if self.order else q @ (k.T / np.float32(np.sqrt(2.0)))
            a = np.exp(s - s.max(-1, keepdims=True))
            return (a / a.sum(-1, keepdims=True)) @ v

    assert npattn.compare(Plain(0), Plain(1), npattn.book_inputs()).first_divergence is None
