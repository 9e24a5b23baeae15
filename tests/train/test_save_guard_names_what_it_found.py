"""A run's save guard names what it finds at the path: a directory is a directory (it was "another
file"); a file in the inode of the one the run wrote may be a new one (it was "modified")."""

import os

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.train.saveguard import SaveGuard


def test_a_directory_put_at_the_path_is_named_a_directory(tmp_path):
    path = str(tmp_path / "run.npz")
    guard = SaveGuard(path)
    os.mkdir(path)
    with pytest.raises(CheckpointError, match="it now holds a directory that was not there when the run started"):
        guard.check()


def test_a_file_changed_in_place_may_be_a_new_one(tmp_path):
    path = str(tmp_path / "run.npz")
    npattn.save({"w": np.zeros(2)}, path)
    guard = SaveGuard(path)
    with open(path, "ab") as f:
        f.write(b"more")
    with pytest.raises(CheckpointError, match="modified or replaced by a new one"):
        guard.check()


def test_a_plot_guard_speaks_of_a_plot_path(tmp_path):
    path = str(tmp_path / "p.png")
    guard = SaveGuard(path, "plot")
    open(path, "wb").write(b"x")
    with pytest.raises(CheckpointError, match=r"cannot write plot .*another run with the same plot path"):
        guard.check()
