"""A run that saves repeatedly replaces its own checkpoint though the umask made it read-only
(``umask 0222``): the file is the run's last write, as the run left it. A checkpoint someone made
read-only between two saves is still refused and left as it is."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

import npattn

pytestmark = pytest.mark.skipif(not hasattr(os, "umask") or sys.platform == "win32", reason="POSIX modes")

RUN = [sys.executable, "-m", "npattn", "train", "--steps", "30", "--log-every", "0", "--save-every", "10"]


def test_a_run_under_umask_0222_saves_every_checkpoint(tmp_path):
    target = tmp_path / "u.npz"
    run = subprocess.run(
        ["sh", "-c", 'umask 0222 && exec "$@"', "sh", *RUN, "--save", str(target)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert npattn.load(target)["step"] == 30
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o444  # the mode the umask gives, kept


def _run_editing_between_saves(target, edit, before_run=""):
    """The CLI run of ``RUN`` saving to ``target`` in a child process; ``edit`` (Python, ``path`` the
    target) runs just before every save but the first; ``before_run`` just before the run."""
    script = (
        "import os, sys\n"
        "from npattn.cli.main import main\n"
        "import npattn.train.checkpoint as checkpoint\n"
        "path, calls, orig = sys.argv[1], [], checkpoint.save_run\n"
        "def save_run(*a, **k):\n"
        f"    if calls: {edit}\n"
        "    calls.append(1)\n"
        "    return orig(*a, **k)\n"
        "checkpoint.save_run = save_run\n"
        f"{before_run}\n"
        f"sys.exit(main({RUN[3:]!r} + ['--save', path]))\n"
    )
    return subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True, timeout=300)


def test_a_checkpoint_made_read_only_between_saves_is_still_refused(tmp_path):
    target = tmp_path / "r.npz"
    run = _run_editing_between_saves(target, "os.chmod(path, 0o444)")
    assert run.returncode == 2 and "read-only" in run.stderr, run.stdout + run.stderr
    assert npattn.load(target)["step"] == 10  # left as it is


def test_a_file_swapped_in_between_saves_under_umask_0222_is_named_as_such(tmp_path):
    target = tmp_path / "s.npz"
    swap = "os.rename(path, path + '.moved'); os.symlink(path + '.moved', path)"
    run = _run_editing_between_saves(target, swap, before_run="os.umask(0o222)")
    assert run.returncode == 2 and "it now holds a symlink" in run.stderr, run.stdout + run.stderr
    assert "read-only" not in run.stderr
    assert npattn.load(str(target) + ".moved")["step"] == 10
