"""After an interrupted command, a late Ctrl-C (a burst of them) while Python shuts down is
ignored: the exit code stays 130 and no traceback is printed."""

import os
import subprocess
import sys

import pytest

SCRIPT = """
import importlib, os, signal, sys
cli = importlib.import_module("npattn.cli.main")  # the module (npattn.cli.main is also the function)
cli.main = lambda: 130  # an interrupted command
code = cli.entry()
os.kill(os.getpid(), signal.SIGINT)  # one more Ctrl-C, after the command ended
sys.exit(code)
"""


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_ctrl_c_after_the_interrupt_is_ignored():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 130 and "Traceback" not in result.stderr, result.stderr


SECOND_PRESS = """
import importlib, os, signal, sys, time
cli = importlib.import_module("npattn.cli.main")

def command():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        os.kill(os.getpid(), signal.SIGINT)  # a second press while the first is reported
        time.sleep(0.2)
        print("reported whole", file=sys.stderr)
        return 130
    return 0

cli.main = command
sys.exit(cli.entry())
"""


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_second_ctrl_c_while_the_first_is_reported_is_ignored():
    result = subprocess.run([sys.executable, "-c", SECOND_PRESS], capture_output=True, text=True, timeout=60)
    assert result.returncode == 130 and result.stderr == "reported whole\n", result.stderr
