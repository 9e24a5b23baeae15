"""`npattn check FILE.py:NAME_forward` of the forward half of a pair (it returns (output, cache))
says to check the pair by its stem, instead of only that the tuple is not an array."""

import pytest

from npattn.debug.usercode import check_attention
from npattn.errors import DTypeError

PAIR = """
import numpy as np
def {forward}(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ k.T / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
    return a @ v, (x, a)
def attn_backward(d_out, cache):
    return None
def lone(x, W_query, W_key, W_value):
    return {forward}(x, W_query, W_key, W_value)
"""


def _check(tmp_path, forward, name):
    path = tmp_path / f"{forward}.py"
    path.write_text(PAIR.format(forward=forward))
    return path, lambda: check_attention(f"{path}:{name}")


def test_the_forward_half_of_a_pair_is_pointed_to_its_stem(tmp_path):
    path, run = _check(tmp_path, "attn_forward", "attn_forward")
    with pytest.raises(DTypeError) as info:
        run()
    message = str(info.value)
    assert "attn_forward returned a tuple of 2" in message
    assert f"check the pair by its stem: npattn check {path}:attn (it runs attn_forward with attn_backward)" in message


def test_a_function_with_a_sibling_backward_is_told_to_be_renamed(tmp_path):
    _, run = _check(tmp_path, "attn", "attn")
    with pytest.raises(DTypeError, match=r"rename it attn_forward, then check the pair by its stem: npattn check "):
        run()


def test_a_tuple_without_a_sibling_backward_keeps_the_general_hint(tmp_path):
    _, run = _check(tmp_path, "attn_forward", "lone")
    with pytest.raises(DTypeError, match=r"the output alone: a forward that returns \(output, cache\) is NAME_forward"):
        run()
