"""The forward half of a pair whose (output, cache) would stack into one array (a cache of the
output's shape) is pointed to its stem too, never checked as an output of shape (2, n, d_out)."""

import pytest

from npattn.debug.usercode import check_attention
from npattn.errors import DTypeError

PAIR = """
import numpy as np
def attn_forward(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ k.T / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
    return a @ v, v
def attn_backward(d_out, cache):
    return None
"""


def test_a_cache_of_the_outputs_shape_is_not_stacked_into_the_output(tmp_path):
    path = tmp_path / "stacked.py"
    path.write_text(PAIR)
    with pytest.raises(DTypeError) as info:
        check_attention(f"{path}:attn_forward")
    message = str(info.value)
    assert "attn_forward returned a tuple of 2 (ndarray (6, 2), ndarray (6, 2)), expected the output alone" in message
    assert f"check the pair by its stem: npattn check {path}:attn (it runs attn_forward with attn_backward)" in message
