"""``npattn check`` with a relative path from a working folder that was removed is one line and
exit code 2 (the check's process printed a traceback and blamed the user's code for ending it)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import npattn

HOME = str(Path(npattn.__file__).resolve().parent.parent)


def test_a_relative_path_from_a_removed_folder_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    command = f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && "
    command += f"exec {shlex.quote(sys.executable)} -m npattn check rel.py:f"
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env={**os.environ, "PYTHONPATH": HOME},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "rel.py" in done.stderr
