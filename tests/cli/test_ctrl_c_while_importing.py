"""Ctrl-C while ``python -m npattn`` or the ``npattn`` script is still importing the package prints
the command's one interrupt line and exits 130; ``import npattn`` in a program of one's own keeps
Python's handler.

It used to print a KeyboardInterrupt traceback and exit 1 (or die by the signal, -2). The import is
held deterministically: a sitecustomize on PYTHONPATH makes the import of numpy (the package's
first heavy import) print a line and sleep, and the signal is sent once that line is read.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")

HOOK = '''
import signal, sys, time


class _HoldNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and "npattn" in sys.modules:
            sys.meta_path.remove(self)
            default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
            print("holding the import of numpy; Python's handler:", default, flush=True)
            time.sleep(30)
        return None


sys.meta_path.insert(0, _HoldNumpy())
'''

SCRIPT = "import sys\nfrom npattn.cli.main import entry\nsys.exit(entry())\n"  # what pip writes


def _interrupted(tmp_path, argv, ignored=False):
    """``ignored``: start with SIGINT ignored, as a script's background job (``cmd &``) is."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hook"), str(ROOT)])}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return line, proc.returncode, err


@pytest.mark.parametrize("how", ["-m", "script"])
def test_ctrl_c_during_the_import_of_the_command_is_one_line_and_130(tmp_path, how):
    if how == "-m":
        argv = [sys.executable, "-m", "npattn", "train", "--steps", "5"]
    else:
        (tmp_path / "npattn").write_text(SCRIPT)
        argv = [sys.executable, str(tmp_path / "npattn"), "train", "--steps", "5"]
    line, code, err = _interrupted(tmp_path, argv)
    assert (code, err) == (130, "npattn train: interrupted\n")
    assert line.startswith("holding the import of numpy; Python's handler: False")  # the guard was on


def test_a_background_job_started_with_ctrl_c_ignored_is_interrupted_during_the_import_too(tmp_path):
    """Started as `npattn train ... &` from a script, SIGINT is ignored: the import used to keep it
    ignored (the press was dropped and the run trained on) while the command line, once running,
    takes Ctrl-C over; now the import does as the command line does."""
    line, code, err = _interrupted(tmp_path, [sys.executable, "-m", "npattn", "train", "--steps", "5"], ignored=True)
    assert line.startswith("holding the import of numpy; Python's handler: False")
    assert (code, err) == (130, "npattn train: interrupted\n")


def test_import_npattn_in_a_program_keeps_pythons_handler(tmp_path):
    program = "import signal, npattn\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    (tmp_path / "mine.py").write_text(program)
    line, code, err = _interrupted(tmp_path, [sys.executable, str(tmp_path / "mine.py")])
    assert line.startswith("holding the import of numpy; Python's handler: True")
    assert code == -signal.SIGINT and err.rstrip().endswith("KeyboardInterrupt")  # Python's own, untouched


def test_after_the_import_the_guard_stays_until_the_command_line_sets_its_own(tmp_path):
    """``python -m npattn`` imports the command line's modules after the package: a Ctrl-C there
    printed Python's traceback when the package had given Python's handler back."""
    code = "import signal, sys; sys.argv[0] = '-m'; sys.orig_argv = ['python', '-m', 'npattn']; import npattn; "
    code += "print(signal.getsignal(signal.SIGINT) is npattn._interrupts.exit_while_starting, npattn._guarded); "
    code += "from npattn.cli.main import entry; sys.argv = ['npattn', 'train', '--steps', '0']; "
    code += "entry(); print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"  # the command's, then its end
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split()[:2] == ["True", "True"] and out.stdout.split()[-1] == "True", out.stdout + out.stderr
