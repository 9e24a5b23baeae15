"""Ctrl-C in any command: one line ("npattn COMMAND: interrupted") on stderr and exit 130, never a
KeyboardInterrupt traceback."""

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

cli_main = importlib.import_module("npattn.cli.main")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["demo"], ["gradcheck"], ["check", "x.py:f"], ["train"]])
def test_every_command_reports_an_interrupt_in_one_line(monkeypatch, capsys, argv):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_dispatch", interrupted)
    assert cli_main.main(argv) == 130
    assert capsys.readouterr().err == f"npattn {argv[0]}: interrupted\n"


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_ctrl_c_during_a_long_gradcheck():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "npattn", "gradcheck", "--tokens", "40", "--d-in", "40", "--d-out", "40"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == "npattn gradcheck: interrupted\n", err
