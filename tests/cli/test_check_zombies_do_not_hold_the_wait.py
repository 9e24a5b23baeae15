"""``npattn check`` waits for the child's process group to be gone, and a killed process left as a
zombie (the watchdog, orphaned until init reaps it) no longer holds that wait for its whole length:
every check took 0.2 s more."""

import os
import signal
import time

import pytest

from npattn.cli.check import _wait_group_gone

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc") or not hasattr(os, "fork"), reason="Linux /proc")


def test_a_group_of_zombies_is_gone():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(30)
        os._exit(0)
    try:
        time.sleep(0.2)  # the child has its own group now
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)  # a zombie: killed, not reaped
        start = time.monotonic()
        _wait_group_gone(pid, seconds=2.0)
        assert time.monotonic() - start < 1.0
    finally:
        os.waitpid(pid, 0)
