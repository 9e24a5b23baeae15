"""User code that closes the file descriptors its process inherited (the pipe npattn check reports
through among them) gets one line and exit code 2 that says so (the check's process printed a
traceback, and the message asked whether the code called os._exit)."""

import os
import subprocess
import sys
from pathlib import Path

import npattn

CLOSES = '''import os
import numpy as np

for fd in range(3, 256):
    try:
        os.close(fd)
    except OSError:
        pass


def attention(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ k.T / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True))
    return (a / a.sum(-1, keepdims=True)) @ v
'''


def test_code_closing_the_report_pipe_is_one_line(tmp_path):
    (tmp_path / "closefd.py").write_text(CLOSES)
    env = {**os.environ, "PYTHONPATH": str(Path(npattn.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "npattn", "check", "closefd.py:attention"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "closed the pipe npattn check reports through" in done.stderr
