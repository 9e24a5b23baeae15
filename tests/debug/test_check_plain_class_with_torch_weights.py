"""A class of one's own (not an nn.Module) holding torch Linear layers is run on a torch tensor when
it refuses the NumPy array: it was handed a NumPy array only, and torch's TypeError was blamed on
the code. One that takes the NumPy array (converting it itself, or NumPy arithmetic on torch
weights) still gets it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]

CODE = """
import torch


class Plain:
    def __init__(self, d_in, d_out):
        self.W_query = torch.nn.Linear(d_in, d_out, bias=False)
        self.W_key = torch.nn.Linear(d_in, d_out, bias=False)
        self.W_value = torch.nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        return torch.softmax(queries @ keys.transpose(-1, -2) / keys.shape[-1] ** 0.5, dim=-1) @ values


class FromNumpy:
    def __init__(self, d_in, d_out):
        self.W_query = torch.nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = torch.nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = torch.nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        x = torch.from_numpy(x)
        queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
        weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
        return (weights @ values).detach().numpy()


class WrongScale(Plain):
    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        return torch.softmax(queries @ keys.transpose(-1, -2) / x.shape[-1] ** 0.5, dim=-1) @ values
"""


@pytest.mark.parametrize(
    ("name", "code", "verdict"), [("Plain", 0, "PASSED"), ("FromNumpy", 0, "PASSED"), ("WrongScale", 1, "FAILED")]
)
def test_a_plain_class_with_torch_layers_is_checked(tmp_path, name, code, verdict):
    (tmp_path / "mine.py").write_text(CODE)
    run = [sys.executable, "-m", "npattn", "check", "--timeout", "60", f"mine.py:{name}"]
    out = subprocess.run(run, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == code, out.stdout + out.stderr
    assert f"{name}: {verdict}: the forward is" in out.stdout
