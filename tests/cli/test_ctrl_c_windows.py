"""Ctrl-C wherever it lands in a command's life is the command's one line and exit 130, or, once
the command has returned, nothing (it exits as its work ended).

Each window is hit deterministically: the process sends SIGINT to itself at the point in question.
Before, a press there printed a traceback (while the parser was built, or as ``main`` returned), was
dropped with a traceback and exit 0 (inside a ``__del__``, also during the package's import), or
ended the process by the signal with nothing said (in Python's shutdown).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")

PRESS = "import os, signal, sys\ndef press():\n    os.kill(os.getpid(), signal.SIGINT)\n    sum(range(1000))\n"


def _run(code, *argv):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-c", PRESS + code, *argv]
    return subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)


def test_a_press_dropped_inside_a_del_while_the_package_imports_still_ends_the_command():
    """The import guard used to raise SystemExit, which Python drops inside a ``__del__`` or an import
    lock's callback: "interrupted", a traceback, and the command went on to exit 0."""
    code = "sys.argv[0] = '-m'; sys.orig_argv = [sys.executable, '-m', 'npattn', 'book']\n"
    code += "import npattn\nclass Held:\n    def __del__(self):\n        press()\n"
    code += "Held()\nprint('went on')\n"
    out = _run(code, "book")
    assert (out.returncode, out.stdout, out.stderr) == (130, "", "npattn book: interrupted\n")


def _entry(setup, argv):
    """A program that sets ``setup`` up on the command line's module ``cli`` and runs its entry."""
    code = "import importlib, time\ncli = importlib.import_module('npattn.cli.main')\n" + setup
    return _run(code + f"sys.argv = {argv!r}\nsys.exit(cli.entry())\n")


def test_a_press_while_the_parser_is_built_is_one_line_and_130():
    setup = "build = cli.build_parser\ndef pressed_while_building():\n    press()\n    return build()\n"
    out = _entry(setup + "cli.build_parser = pressed_while_building\n", ["npattn", "book"])
    assert (out.returncode, out.stderr) == (130, "npattn book: interrupted\n")


def test_a_press_as_main_returns_is_one_line_and_130():
    out = _entry("def command():\n    press()\n    return 0\ncli.main = command\n", ["npattn", "gradcheck"])
    assert (out.returncode, out.stderr) == (130, "npattn gradcheck: interrupted\n")


def test_a_press_python_drops_inside_a_del_is_reported_not_printed_as_a_traceback():
    setup = "class Held:\n    def __del__(self):\n        press()\n"
    setup += "def command():\n    Held()\n    print('the work, whole')\n    return 0\ncli.main = command\n"
    out = _entry(setup, ["npattn", "trace", "--book"])
    assert (out.returncode, out.stdout, out.stderr) == (130, "the work, whole\n", "npattn trace: interrupted\n")


def test_a_press_after_the_command_returned_waits_for_the_exit():
    """Python's shutdown gives SIGINT back to the OS: a press there ended the process by the signal
    (-2) with nothing said, after a run that had done its work."""
    setup = "entry = cli.entry\ndef then_press():\n    code = entry()\n    press()\n"
    setup += "    time.sleep(0.1)\n    return code\n"
    out = _entry(setup + "cli.main = lambda: 0\ncli.entry = then_press\n", ["npattn", "book"])
    assert (out.returncode, out.stderr) == (0, "")


def test_other_unraisable_exceptions_are_still_printed():
    setup = "class Broken:\n    def __del__(self):\n        raise ValueError('in a __del__')\n"
    out = _entry(setup + "def command():\n    Broken()\n    return 0\ncli.main = command\n", ["npattn", "book"])
    assert out.returncode == 0 and "ValueError: in a __del__" in out.stderr
