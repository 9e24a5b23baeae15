"""A save path whose folder is a loop of symbolic links, or a link to a missing folder, is named as
such (it was "does not exist", though the name is there)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")


def test_folder_links_are_named(tmp_path):
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    state = {"w": np.zeros(2)}
    with pytest.raises(CheckpointError, match="'loop' is a loop of symbolic links"):
        npattn.save(state, "loop/x.npz")
    with pytest.raises(CheckpointError, match="'dangling' is a symbolic link to a missing folder"):
        npattn.save(state, "dangling/x.npz")
    with pytest.raises(CheckpointError, match="'missing' does not exist"):
        npattn.save(state, "missing/x.npz")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
