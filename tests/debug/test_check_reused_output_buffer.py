"""Correct code that writes every result into one output buffer of its own (per shape) is checked
on the values each call returned: the report kept the array itself, which the code's next call
overwrote (its output block showed another call's values, its sections disagreed, and the
command's check outside its process called the code a patcher of NumPy)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import npattn

BUFFERED = '''import numpy as np
_out = {}

def attn(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    out = _out.setdefault((a @ v).shape, np.empty_like(a @ v))
    out[...] = a @ v
    return out
'''


def test_check_attention_reports_the_values_each_call_returned(tmp_path):
    (tmp_path / "buf.py").write_text(BUFFERED)
    report = npattn.check_attention(str(tmp_path / "buf.py") + ":attn")
    assert report.passed
    expected = npattn.SelfAttention_v1(3, 2, rng=123)(npattn.book_inputs())
    np.testing.assert_allclose(report.output, expected, rtol=1e-6)
    assert "FAILED" not in str(report)


def test_the_command_passes_it(tmp_path):
    (tmp_path / "buf.py").write_text(BUFFERED)
    env = {**os.environ, "PYTHONPATH": str(Path(npattn.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "npattn", "check", "buf.py:attn"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
