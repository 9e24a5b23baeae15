"""`npattn check` of code computing in float16: an output within float16's rounding of the reference
passes; one off by more, but within what float16 arithmetic itself errs on the input, is NOT JUDGED
(exit code 3: right and wrong code cannot be told apart there), never called wrong; a float16 output
off by more than that, or one a catalogued mistake reproduces, fails."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import npattn
from npattn.book import book_inputs
from npattn.cli.main import main
from npattn.debug.usercode import book_weights, run_check

CODE = textwrap.dedent(
    """
    import numpy as np


    def half(x, W_query, W_key, W_value, scale=True, off=1.0):
        h = np.float16
        x, W_query, W_key, W_value = (a.astype(h) for a in (x, W_query, W_key, W_value))
        q, k, v = x @ W_query, x @ W_key, x @ W_value
        s = q @ np.swapaxes(k, -1, -2)
        if scale:
            s = s / h(np.sqrt(k.shape[-1]))
        a = np.exp(s - s.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        return (a @ v) * h(off)


    def float16_throughout(x, W_query, W_key, W_value):
        return half(x, W_query, W_key, W_value)


    def float16_unscaled(x, W_query, W_key, W_value):
        return half(x, W_query, W_key, W_value, scale=False)


    def float16_two_percent_off(x, W_query, W_key, W_value):
        return half(x, W_query, W_key, W_value, off=1.02)


    class Heads:
        def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
            self.num_heads = num_heads
            self.W_query, self.W_key, self.W_value = (np.zeros((d_in, d_out)) for _ in range(3))

        def forward(self, x):
            h = np.float16
            b, n, _ = x.shape
            Ws = [W.astype(h) for W in (self.W_query, self.W_key, self.W_value)]
            q, k, v = ((x.astype(h) @ W).reshape(b, n, self.num_heads, -1).transpose(0, 2, 1, 3) for W in Ws)
            s = q @ k.transpose(0, 1, 3, 2) / h(np.sqrt(q.shape[-1]))
            s = np.where(np.triu(np.ones((n, n), bool), 1), h(-np.inf), s)
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            return (a @ v).transpose(0, 2, 1, 3).reshape(b, n, -1)

        __call__ = forward


    class Rounded(Heads):  # computed in float64, returned rounded to float16: right to float16's rounding
        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = ((x @ W).reshape(b, n, self.num_heads, -1).transpose(0, 2, 1, 3)
                       for W in (self.W_query, self.W_key, self.W_value))
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
            s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            return (a @ v).transpose(0, 2, 1, 3).reshape(b, n, -1).astype(np.float16)

        __call__ = forward


    def mixed(x, W_query, W_key, W_value):  # projections and softmax in float32, scores and context in float16
        h, f = np.float16, np.float32
        q, k, v = (x.astype(f) @ W.astype(f) for W in (W_query, W_key, W_value))
        s = (q.astype(h) @ np.swapaxes(k.astype(h), -1, -2)) / h(np.sqrt(k.shape[-1]))
        s = s.astype(f)
        a = np.exp(s - s.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        return a.astype(h) @ v.astype(h)


    class Causal:
        def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
            self.p = dropout
            self.W_query, self.W_key, self.W_value = (np.zeros((d_in, d_out)) for _ in range(3))

        def compute(self, x):
            h = np.float16
            x = np.asarray(x).astype(h)
            q, k, v = (x @ W.astype(h) for W in (self.W_query, self.W_key, self.W_value))
            n = x.shape[-2]
            s = q @ np.swapaxes(k, -1, -2) / h(np.sqrt(k.shape[-1]))
            s = np.where(np.triu(np.ones((n, n), bool), 1), h(-np.inf), s)
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            if self.p:
                a = a * (np.random.rand(*a.shape) >= self.p) / (1 - self.p)
            return a @ v

        def forward(self, x):
            return self.compute(x)

        __call__ = forward


    class CachedCausal(Causal):  # keeps its first output: wrong for every later input
        out = None

        def forward(self, x):
            if self.out is None:
                self.out = self.compute(x)
            return self.out

        __call__ = forward
    """
)


@pytest.fixture()
def code_file(tmp_path):
    path = tmp_path / "mine16.py"
    path.write_text(CODE)
    return path


def _in_process(path, name):
    out = io.StringIO()
    return run_check(f"{path}:{name}", out=out), out.getvalue()


def test_float16_code_is_not_judged_where_float16_itself_errs(code_file, capsys):
    for name in ("float16_throughout", "Heads"):
        code, text = _in_process(code_file, name)
        assert code == 3, text
        assert f"{name}: NOT JUDGED" in text and "WRONG" not in text and "FAILED" not in text, text
        # the CLI's parent process re-checks the forward and comes to the same verdict
        assert main(["check", f"{code_file}:{name}"]) == 3
        assert f"{name}: NOT JUDGED" in capsys.readouterr().out


def test_float16_code_with_a_mistake_still_fails(code_file):
    code, text = _in_process(code_file, "float16_unscaled")
    assert code == 1 and "float16_unscaled: FAILED" in text and "NOT JUDGED: max" not in text, text
    code, text = _in_process(code_file, "float16_two_percent_off")
    assert code == 1 and "  WRONG: max |output - reference|" in text and "NOT JUDGED: max" not in text, text


def test_diagnose_tells_float16_noise_from_a_mistake():
    x, W = book_inputs(), book_weights()
    exact = npattn.diagnose(x, W, np.zeros((6, 2))).expected
    tenth = npattn.diagnose(x, W, (exact * 1.001).astype(np.float16))  # a 0.1% mistake hides in float16's noise
    assert not tenth.correct and tenth.not_judged and "NOT JUDGED" in str(tenth)
    assert not npattn.check_rows(x, W, (exact * 1.001).astype(np.float16)).passed
    wrong = npattn.diagnose(x, W, (exact * 1.02).astype(np.float16))
    assert not wrong.correct and not wrong.not_judged and "WRONG" in str(wrong)
    assert npattn.diagnose(x, W, exact.astype(np.float16)).correct
    # float32 and float64 outputs are judged as before: never "not judged"
    for dtype in (np.float32, np.float64):
        assert not npattn.diagnose(x, W, (exact * 1.001).astype(dtype)).not_judged


TORCH_HALF = textwrap.dedent(
    """
    import torch


    def torch_half(x, W_query, W_key, W_value):
        x, Wq, Wk, Wv = (torch.tensor(a).half() for a in (x, W_query, W_key, W_value))
        q, k, v = x @ Wq, x @ Wk, x @ Wv
        a = torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1)
        return (a @ v).numpy()
    """
)


def test_torchs_own_half_precision_attention_is_not_judged(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "torch_half.py"
    path.write_text(TORCH_HALF)
    run = subprocess.run(
        [sys.executable, "-m", "npattn", "check", f"{path}:torch_half", "--timeout", "60"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 3 and "torch_half: NOT JUDGED" in run.stdout, run.stdout + run.stderr


def test_not_judged_code_is_still_checked_for_a_cached_output_and_says_its_dropout_was_not_checked(code_file, capsys):
    code, text = _in_process(code_file, "CachedCausal")
    assert code == 1 and "CachedCausal: FAILED: the forward is wrong (second input: see there)" in text, text
    code, text = _in_process(code_file, "Causal")
    assert code == 3 and "5. dropout: not checked" in text and "its dropout not checked" in text, text
    code, text = _in_process(code_file, "mixed")  # right code in mixed precision: no caching is suspected
    assert code == 3 and "second input" not in text, text


def test_a_multi_head_output_rounded_to_float16_passes_in_the_child_and_the_parent(code_file, capsys):
    assert main(["check", f"{code_file}:Rounded"]) == 0
    assert "Rounded: PASSED" in capsys.readouterr().out
