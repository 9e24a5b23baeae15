"""``npattn check`` fails a backward that changes the weights it was given in place (through the
forward's cache, or the object's own attributes): its gradients were right, so it passed, and on
a model it would change the weights at every backward."""

import pytest

from npattn.cli.main import main

CODE = '''
import numpy as np
import npattn


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def pair_forward(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    a = _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1]))
    return a @ v, (x, W_query, W_key, W_value, q, k, v, a)


def pair_backward(d, cache):
    x, W_query, W_key, W_value, q, k, v, a = cache
    scale = 1 / np.sqrt(k.shape[-1])
    da, dv = d @ np.swapaxes(v, -1, -2), np.swapaxes(a, -1, -2) @ d
    ds = a * (da - (da * a).sum(-1, keepdims=True)) * scale
    dq, dk = ds @ k, np.swapaxes(ds, -1, -2) @ q
    dx = dq @ W_query.T + dk @ W_key.T + dv @ W_value.T
    grads = dx, x.T @ dq, x.T @ dk, x.T @ dv
    if EDIT:
        W_query *= 3  # the caller's weight, held in the cache
    return grads


EDIT = False


def edits_forward(x, W_query, W_key, W_value):
    return pair_forward(x, W_query, W_key, W_value)


def edits_backward(d, cache):
    global EDIT
    EDIT = True
    try:
        return pair_backward(d, cache)
    finally:
        EDIT = False


class EditsItsWeight(npattn.SelfAttention_v1):
    def backward(self, grad_output):
        dx = super().backward(grad_output)
        self.W_query.data *= 3
        return dx
'''


@pytest.fixture
def code(tmp_path):
    (tmp_path / "mine.py").write_text(CODE)
    return tmp_path / "mine.py"


@pytest.mark.parametrize(
    ("name", "who"), [("edits", "edits_backward (through its cache)"), ("EditsItsWeight", "EditsItsWeight.backward")]
)
def test_a_backward_that_edits_a_weight_fails(code, capsys, name, who):
    assert main(["check", f"{code}:{name}"]) == 1
    out = capsys.readouterr().out
    assert f"{who} changed the weight(s) W_query in place" in out
    assert f"{name}: FAILED: the forward is right, the backward is wrong" in out


def test_the_same_backward_without_the_edit_passes(code, capsys):
    """Its backward (x.T @ dq) takes one sequence: checked on one at the second shape, with a note."""
    assert main(["check", f"{code}:pair"]) == 0
    assert "pair's backward takes one sequence (n, d_in) (on a batch (2, 5, 4) it raised ValueError)" in (
        capsys.readouterr().out
    )
