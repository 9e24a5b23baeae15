"""``python -m npattn`` in a folder holding files named like Python's or NumPy's modules.

Python's ``-m`` puts the current folder first on the search path; the ``npattn`` script does not.
npattn searches as the script does, so a ``signal.py`` or ``numpy.py`` of the user's is never
imported in place of Python's or NumPy's own (it was: the user's file's error, as a traceback).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import npattn

HOME = str(Path(npattn.__file__).resolve().parent.parent)
SHADOWS = ["signal", "numpy", "pickle", "subprocess", "select", "json", "zipfile", "tempfile", "hashlib"]


def _shadowed_folder(tmp_path: Path) -> Path:
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('SHADOWED: {name}.py of the folder ran')\n")
    return tmp_path


def _npattn_m(args, cwd, spelling=("-m", "npattn")):
    env = {**os.environ, "PYTHONPATH": HOME}
    return subprocess.run([sys.executable, *spelling, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("spelling", [["-mnpattn"], ["-Bm", "npattn"], ["-W", "error", "-m", "npattn"],
                                      ["-Xdev", "-Bmnpattn"], ["-m", "npattn.__main__"]])  # fmt: skip
def test_every_spelling_of_python_m_npattn_searches_as_the_command(tmp_path, spelling):
    done = _npattn_m(["--help"], _shadowed_folder(tmp_path), spelling)
    assert done.returncode == 0 and "SHADOWED" not in done.stdout + done.stderr, done.stderr


@pytest.mark.parametrize("args", [["demo"], ["--help"], ["trace", "--tokens", "3"]])
def test_files_named_like_modules_in_the_current_folder_are_not_imported(tmp_path, args):
    done = _npattn_m(args, _shadowed_folder(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "SHADOWED" not in done.stdout + done.stderr


MINE = (
    "import numpy as np\nfrom my_helpers import SCALE\n\n"
    "def attention(x, W_query, W_key, W_value):\n"
    "    q, k, v = x @ W_query, x @ W_key, x @ W_value\n"
    "    s = q @ k.T / np.sqrt(k.shape[-1]) * SCALE\n"
    "    w = np.exp(s - s.max(-1, keepdims=True))\n"
    "    return (w / w.sum(-1, keepdims=True)) @ v\n"
)


def test_a_checked_file_still_imports_its_own_helpers_beside_it(tmp_path):
    folder = _shadowed_folder(tmp_path)
    (folder / "my_helpers.py").write_text("SCALE = 1.0\n")
    (folder / "mine.py").write_text(MINE)
    done = _npattn_m(["check", "mine.py:attention"], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SHADOWED" not in done.stdout + done.stderr


def test_an_import_in_a_program_keeps_the_search_path(tmp_path):
    code = "import sys, npattn; print(sys.path[0] == '')"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": HOME},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr


def test_under_python_P_a_pythonpath_entry_naming_the_current_folder_is_kept(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "code").mkdir()
    (tmp_path / "lib" / "my_helpers.py").write_text("SCALE = 1.0\n")
    (tmp_path / "code" / "mine.py").write_text(MINE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), HOME])}
    done = subprocess.run([sys.executable, "-P", "-m", "npattn", "check", "../code/mine.py:attention"],
                          cwd=tmp_path / "lib", env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("where", ["beside", "elsewhere"])
def test_a_helper_imported_inside_the_checked_function_is_found(tmp_path, where):
    folder = _shadowed_folder(tmp_path / "code") if (tmp_path / "code").mkdir() is None else None
    (folder / "my_helpers.py").write_text("SCALE = 1.0\n")
    (folder / "mine.py").write_text(MINE.replace("from my_helpers import SCALE\n", "").replace(
        "    q, k, v", "    from my_helpers import SCALE\n    q, k, v"))
    cwd, spec = (folder, "mine.py:attention") if where == "beside" else (tmp_path, "code/mine.py:attention")
    done = _npattn_m(["check", spec], cwd)
    assert done.returncode == 0, done.stdout + done.stderr
