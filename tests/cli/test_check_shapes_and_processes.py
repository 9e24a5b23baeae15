"""npattn check at a second shape (code right only at the book's sizes fails, saying so) and with
processes the user's code starts (they do not outlive the check); (out, cache, 1) returned by a
forward is described as what was returned."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from npattn.cli.main import main

LEARNER = textwrap.dedent(
    """
    import os
    import time
    import numpy as np


    def _softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


    def fixed_forward(x, W_query, W_key, W_value):
        q, k, v = x @ W_query, x @ W_key, x @ W_value
        a = _softmax(q @ k.T / np.sqrt(2.0))  # right only for the book's d_out = 2
        return a @ v, (x, W_query, W_key, W_value, q, k, v, a)


    def fixed_backward(d_out, cache):
        x, W_query, W_key, W_value, q, k, v, a = cache
        scale = 1 / np.sqrt(2.0)
        dA, dv = d_out @ v.T, a.T @ d_out
        ds = scale * a * (dA - np.sum(dA * a, axis=-1, keepdims=True))
        dq, dk = ds @ k, ds.T @ q
        dx = dq @ W_query.T + dk @ W_key.T + dv @ W_value.T
        return dx, x.T @ dq, x.T @ dk, x.T @ dv


    def six_tokens(x, W_query, W_key, W_value):
        q, k, v = x @ W_query, x @ W_key, x @ W_value
        a = _softmax(q @ k.T / np.sqrt(k.shape[-1]))
        return (a @ v).reshape(6, -1)  # six tokens, always


    def general(x, W_query, W_key, W_value):
        q, k, v = x @ W_query, x @ W_key, x @ W_value
        return _softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v


    def _fork_sleeper(where):
        pid = os.fork()
        if pid == 0:
            with open(where, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(60)
            os._exit(0)
        for _ in range(200):  # wait until the child has written its pid (each call forks a new one)
            if os.path.exists(where) and open(where).read() == str(pid):
                break
            time.sleep(0.01)


    def forks_then_loops(x, W_query, W_key, W_value):
        _fork_sleeper(os.environ["NPATTN_TEST_PID_FILE"])
        while True:
            pass


    def forks_then_returns(x, W_query, W_key, W_value):
        _fork_sleeper(os.environ["NPATTN_TEST_PID_FILE"])
        return general(x, W_query, W_key, W_value)


    def returns_three(x, W_query, W_key, W_value):
        out = general(x, W_query, W_key, W_value)
        return out, {"cache": out}, 1
    """
)


@pytest.fixture
def learner(tmp_path: Path) -> Path:
    path = tmp_path / "learner.py"
    path.write_text(LEARNER)
    return path


def test_code_right_only_at_the_book_shape_fails_at_the_second(learner, capsys):
    assert main(["check", f"{learner}:fixed"]) == 1
    out = capsys.readouterr().out
    assert "another shape: n=5, d_in=4, d_out=3 (random x and weights): FAILED at this shape only" in out
    verdict = "fixed: FAILED: right at the book's shape, wrong at n=5, d_in=4, d_out=3 (see 'another shape')"
    assert out.rstrip().endswith(verdict)


def test_code_that_raises_at_the_second_shape_fails_there(learner, capsys):
    assert main(["check", f"{learner}:six_tokens"]) == 1
    out = capsys.readouterr().out
    assert "another shape: n=5, d_in=4, d_out=3 (random x and weights): FAILED at this shape only" in out
    assert "six_tokens raised ValueError" in out


def test_general_code_passes_at_both_shapes(learner, capsys):
    assert main(["check", f"{learner}:general"]) == 0
    assert "another shape: n=5, d_in=4, d_out=3 (random x and weights): PASSED" in capsys.readouterr().out


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting to be reaped counts: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc").is_dir(), reason="needs os.fork and /proc")
@pytest.mark.parametrize("name, code", [("forks_then_loops", 2), ("forks_then_returns", 0)])
def test_processes_the_user_code_starts_do_not_outlive_the_check(learner, tmp_path, monkeypatch, capsys, name, code):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("NPATTN_TEST_PID_FILE", str(pid_file))
    assert main(["check", f"{learner}:{name}", "--timeout", "1.5"]) == code
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(pid):
        os.kill(pid, 9)
        pytest.fail(f"the process {pid} the user's code forked outlived npattn check")


def test_a_forward_returning_three_values_is_described_as_such(learner, capsys):
    assert main(["check", f"{learner}:returns_three"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "returns_three returned a tuple of 3 (ndarray (6, 2), dict, int), which npattn cannot read" in err
    assert "the output alone: a forward that returns (output, cache) is NAME_forward" in err
