"""A standard output the parent made non-blocking (O_NONBLOCK on the pipe it reads): when the pipe
filled, Python's writes dropped what did not fit (EAGAIN) without an error, so ``trace`` and
``train`` ended with exit 0 and their output cut short. The command line now waits for room, as on
a blocking pipe, and every byte arrives."""

import fcntl
import os
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_on_a_nonblocking_pipe(args, cwd):
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "npattn", *args], stdout=w, stderr=subprocess.PIPE, env=env, cwd=cwd)
    os.close(w)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:  # nobody reads until the pipe is full
        if struct.unpack("i", fcntl.ioctl(r, termios.FIONREAD, b"\0\0\0\0"))[0] >= 60_000:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the command ended before its output filled the pipe: nothing was tested"
    time.sleep(0.2)  # it meets the full pipe (EAGAIN) and waits
    chunks = []
    while chunk := os.read(r, 1 << 20):
        chunks.append(chunk)
    os.close(r)
    return proc.wait(timeout=120), b"".join(chunks), proc.stderr.read()


@pytest.mark.skipif(sys.platform == "win32", reason="O_NONBLOCK pipes are POSIX")
def test_trace_output_arrives_in_full(tmp_path):
    args = ["trace", "--tokens", "3300"]
    code, out, err = run_on_a_nonblocking_pipe(args, tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    want = subprocess.run([sys.executable, "-m", "npattn", *args], capture_output=True, env=env, cwd=tmp_path)
    assert code == 0 and err == b"" and len(want.stdout) > 70_000 and out == want.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="O_NONBLOCK pipes are POSIX")
def test_train_prints_to_the_end(tmp_path):
    code, out, err = run_on_a_nonblocking_pipe(["train", "--steps", "1200", "--log-every", "1", "--save", "r.npz"],
                                               tmp_path)
    assert code == 0 and err == b"", err
    assert len(out) > 70_000 and out.rstrip().endswith(b"saved r.npz") and (tmp_path / "r.npz").exists()
