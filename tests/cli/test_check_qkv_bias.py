"""``npattn check`` of correct attention with query/key/value biases (``qkv_bias=True``): the check
loaded its own W_query, W_key and W_value but kept the class's random biases, then compared against
attention without biases, so right code FAILED. The biases are set to 0 now (as an out_proj is set
to the identity) and a note says so; a wrong forward with biases still fails."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check(tmp_path, source, target):
    (tmp_path / "user.py").write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "npattn", "check", f"user.py:{target}"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


NPATTN_CLASSES = """
    import npattn

    class V2Bias(npattn.SelfAttention_v2):
        def __init__(self, d_in, d_out):
            super().__init__(d_in, d_out, qkv_bias=True)

    class V2BiasWrong(V2Bias):
        def forward(self, x):
            return super().forward(x) * 1.001
"""


def test_an_npattn_class_with_biases_passes_with_a_note(tmp_path):
    result = check(tmp_path, NPATTN_CLASSES, "V2Bias")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: V2Bias has biases in W_query, W_key, W_value: they were set to 0" in result.stdout
    assert "V2Bias: PASSED: the forward and the backward are right" in result.stdout


def test_a_wrong_forward_with_biases_still_fails(tmp_path):
    assert check(tmp_path, NPATTN_CLASSES, "V2BiasWrong").returncode == 1


@pytest.mark.torch
def test_the_books_torch_classes_with_biases_pass(tmp_path):
    pytest.importorskip("torch")
    source = """
        import torch
        from torch import nn

        class MHA(nn.Module):
            def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=True):
                super().__init__()
                self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
                self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
                self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
                self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
                self.out_proj = nn.Linear(d_out, d_out)
                self.dropout = nn.Dropout(dropout)
                self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

            def forward(self, x):
                b, n, _ = x.shape
                q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                s = (q @ k.transpose(2, 3)).masked_fill(self.mask.bool()[:n, :n], -torch.inf)
                w = self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1))
                return self.out_proj((w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out))
    """
    result = check(tmp_path, source, "MHA")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "has biases in W_query, W_key, W_value: they were set to 0" in result.stdout
