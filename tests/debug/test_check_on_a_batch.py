"""``npattn check`` runs self-attention at its second shape on a batch (2, 5, 4): softmax over
dim=1 (the book's axis for one sequence's (n, n) scores) is wrong for a batch's (b, n, n), and a
backward can be wrong for 3-D input only. Both passed, checked on one sequence only. Code that
takes one sequence (the book's ``keys.T``) is checked on one, with a note."""

import numpy as np
import pytest

from npattn.cli.main import main
from npattn.debug import check_attention

CODE = '''
import numpy as np
import npattn


def _softmax(s, axis):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def dim1(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    return _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1]), axis=1) @ v


def right(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    return _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1]), axis=-1) @ v


def one_sequence(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    return _softmax(q @ k.T / np.sqrt(k.shape[-1]), axis=-1) @ v


class WrongOnBatches(npattn.SelfAttention_v1):
    def backward(self, d_out):
        dx = super().backward(d_out)
        return dx * 1.01 if d_out.ndim == 3 else dx
'''


@pytest.fixture
def code(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(CODE)
    return path


@pytest.mark.parametrize("name", ["dim1", "WrongOnBatches"])
def test_code_wrong_on_a_batch_only_fails(code, capsys, name):
    report = check_attention(f"{code}:{name}")
    assert report.second_batched and not report.passed
    assert main(["check", f"{code}:{name}"]) == 1
    out = capsys.readouterr().out
    assert "another shape: batch=2, n=5, d_in=4, d_out=3 (random x and weights): FAILED on a batch" in out
    if name == "dim1":
        assert "softmax_wrong_axis" in out


@pytest.mark.parametrize("name", ["right", "one_sequence"])
def test_right_code_passes_on_a_batch_or_on_one_sequence(code, capsys, name):
    report = check_attention(f"{code}:{name}")
    assert report.passed and report.second_batched == (name == "right")
    assert main(["check", f"{code}:{name}"]) == 0
    out = capsys.readouterr().out
    if name == "one_sequence":
        assert "one_sequence takes one sequence (n, d_in) (on a batch (2, 5, 4) it raised ValueError)" in out
    assert np.asarray(report.second.output).ndim == (3 if name == "right" else 2)
