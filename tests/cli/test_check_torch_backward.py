"""``npattn check`` of torch classes: one with a backward() of its own had that backward ignored
("PASSED ... (no backward to check)", even with all-zero gradients), or, holding nn.Parameters
without being an nn.Module, crashed loading NumPy weights and blamed the user's forward. Both are
now refused in one line (exit 2); a torch causal class's dropout, drawn from torch's stream, is
said in the verdict not to be checked."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import npattn

pytest.importorskip("torch")


def main(argv):
    """``npattn`` in a fresh process: the check forks, and a process whose torch has started its
    threads (this test session's) must not fork."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(npattn.__file__).parents[1]), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "npattn", *argv], capture_output=True, text=True, env=env, timeout=300)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode

CLASSES = '''
import numpy as np, torch, torch.nn as nn

class P(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Parameter(torch.rand(d_in, d_out)) for _ in range(3))
    def forward(self, x):
        x = torch.as_tensor(x)
        q, k, v = x @ self.W_query, x @ self.W_key, x @ self.W_value
        self._x = x
        return torch.softmax(q @ k.T / k.shape[-1] ** 0.5, -1) @ v
    def backward(self, d_out):
        z = np.zeros(tuple(self.W_query.shape))
        return np.zeros(tuple(self._x.shape)), z, z, z

class Plain:
    def __init__(self, d_in, d_out):
        self.W_query, self.W_key, self.W_value = (nn.Parameter(torch.rand(d_in, d_out)) for _ in range(3))
    forward = P.forward
    backward = P.backward

class PlainNoBackward:
    def __init__(self, d_in, d_out):
        self.W_query, self.W_key, self.W_value = (nn.Parameter(torch.rand(d_in, d_out)) for _ in range(3))
    forward = P.forward

class CausalBadDropout(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.dropout = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        s = (q @ k.transpose(1, 2)).masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        w = torch.softmax(s / k.shape[-1] ** 0.5, -1)
        if self.dropout:
            w = w * (torch.rand_like(w) >= self.dropout) / self.dropout  # 1/p: wrong
        return w @ v
'''


@pytest.fixture
def classes(tmp_path):
    path = tmp_path / "torchclasses.py"
    path.write_text(CLASSES)
    return path


@pytest.mark.parametrize("name", ["P", "Plain"])
def test_a_torch_class_with_its_own_backward_is_refused(classes, name, capsys):
    assert main(["check", "--timeout", "120", f"{classes}:{name}"]) == 2
    err = capsys.readouterr().err
    assert f"{name} is a torch class with a backward() of its own" in err and err.count("\n") == 1


def test_a_class_holding_torch_parameters_without_backward_is_checked_forward_only(classes, capsys):
    assert main(["check", "--timeout", "120", f"{classes}:PlainNoBackward"]) == 0
    assert "PlainNoBackward: PASSED: the forward is right (no backward to check)" in capsys.readouterr().out


def test_a_torch_causal_class_says_its_dropout_is_not_checked(classes, capsys):
    assert main(["check", "--timeout", "120", f"{classes}:CausalBadDropout"]) == 0
    out = capsys.readouterr().out
    assert "5. dropout: not checked: CausalBadDropout is a torch class" in out
    assert out.rstrip().endswith("(no backward to check; its dropout not checked: see section 5)")
