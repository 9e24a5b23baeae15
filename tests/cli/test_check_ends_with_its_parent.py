"""The child that runs the user's code ends when ``npattn check`` is ended by a signal it cannot
clean up after (SIGTERM, SIGHUP, ``timeout(1)``). The child has a session of its own, so nothing
else reaches it: a busy loop ran on, orphaned, long past ``--timeout``."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")

BUSY = """import os, pathlib, re
def f(x, W_query, W_key, W_value):
    pathlib.Path({pid!r}).write_text(str(os.getpid()))
    while True:
        pass
def holds_the_gil(x, W_query, W_key, W_value):  # minutes inside one C call: no other thread runs
    pathlib.Path({pid!r}).write_text(str(os.getpid()))
    re.match(r"(a+)+$", "a" * 40 + "b")
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for good, only not yet reaped
        return stat.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.parametrize(
    ("signum", "name"), [(signal.SIGTERM, "f"), (signal.SIGHUP, "f"), (signal.SIGTERM, "holds_the_gil")]
)
def test_the_users_code_does_not_outlive_a_check_ended_by_a_signal(tmp_path, signum, name):
    (tmp_path / "busy.py").write_text(BUSY.format(pid=str(tmp_path / "pid")))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    check = [sys.executable, "-m", "npattn", "check", "--timeout", "60", f"busy.py:{name}"]
    parent = subprocess.Popen(check, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.05)
        child = int((tmp_path / "pid").read_text())
        parent.send_signal(signum)
        assert parent.wait(timeout=30) == -signum
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the user's code runs on without its parent"
    finally:
        parent.kill()
        parent.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
