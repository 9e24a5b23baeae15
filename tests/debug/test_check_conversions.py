"""npattn check reads what the user's code returned outside the user's code: a value npattn cannot
read as an array is reported as what it is (type, dtype, device) with what was expected, never as
the user's code raising; a bfloat16 tensor is read as the modules read it (widened exactly)."""

import sys

import numpy as np
import pytest

from npattn.cli import main
from npattn.debug.usercode import attention_from_module, check_attention
from npattn.errors import DTypeError


class Weird:
    def numpy(self):
        raise RuntimeError("no numpy here")


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attention(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    return _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])) @ v


def _module(**functions):
    module = type(sys)("returns")
    module.__dict__.update(functions)
    return module


@pytest.mark.parametrize(
    "returned,message",
    [
        (lambda out: [[1.0, 2.0], [1.0]], r"f returned a list, which npattn cannot read as an array \(ValueError: "),
        (
            lambda out: Weird(),
            r"f returned a Weird, which npattn cannot read as an array \(RuntimeError: no numpy here\)",
        ),
        (lambda out: {"out": out}, r"f returned a dict, which npattn cannot read|dtype object"),
    ],
)
def test_an_unreadable_return_value_is_described_not_blamed_on_the_user(returned, message):
    module = _module(f=lambda x, Wq, Wk, Wv: returned(_attention(x, Wq, Wk, Wv)))
    with pytest.raises(DTypeError, match=message) as info:
        check_attention(attention_from_module(module, "f"))
    assert "raised" not in str(info.value) and "weights.py" not in str(info.value)


def test_tensors_npattn_cannot_read_and_bfloat16(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    module = _module(f=lambda x, Wq, Wk, Wv: torch.zeros(6, 2, device="meta"))
    message = r"f returned a torch tensor of dtype torch.float32 on meta, shape \(6, 2\), which npattn cannot read"
    with pytest.raises(DTypeError, match=message):
        check_attention(attention_from_module(module, "f"))
    module = _module(f=lambda x, Wq, Wk, Wv: torch.from_numpy(_attention(x, Wq, Wk, Wv)).to(torch.bfloat16))
    report = check_attention(attention_from_module(module, "f"))  # read (widened), compared, found imprecise
    assert report.output.dtype == np.float32 and not report.passed
    path = tmp_path / "user.py"
    path.write_text("import torch\ndef f(x, W_query, W_key, W_value):\n    return torch.zeros(6, 2, device='meta')\n")
    assert main(["check", f"{path}:f"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "f returned a torch tensor" in err and "raised" not in err


def test_a_backward_returning_odd_gradients_is_a_row_each():
    torch = pytest.importorskip("torch")

    def forward(x, W_query, W_key, W_value):
        return _attention(x, W_query, W_key, W_value), (x, W_query, W_key, W_value)

    def backward(G, cache):
        x = cache[0]
        meta = torch.zeros(3, 2, device="meta")
        return np.zeros_like(x), torch.zeros(3, 2, dtype=torch.bfloat16), meta, Weird()

    report = check_attention(attention_from_module(_module(f_forward=forward, f_backward=backward), "f"))
    problems = {row.name: row.problem for row in report.backward.rows}
    assert problems["W_query"] == ""  # bfloat16 read as float32, then compared (and wrong)
    assert problems["W_key"].startswith("not an array (Tensor: DTypeError: expected a tensor with values")
    assert problems["W_value"] == "not a numeric array (Weird of dtype object)"
    assert report.backward.error == "" and not report.backward.passed
