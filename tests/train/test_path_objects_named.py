"""Odd path objects: a PathLike whose ``__fspath__`` gives an int raised Python's TypeError, and a
path with a NUL byte was told it "must name a file" without naming the NUL."""

import os

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError


class IntPath(os.PathLike):
    def __fspath__(self):
        return 5


def test_a_pathlike_giving_an_int_is_a_checkpoint_error():
    with pytest.raises(CheckpointError, match=r"must be a str or os.PathLike giving a str: .*not int"):
        npattn.save({"w": np.ones(1)}, IntPath())
    with pytest.raises(CheckpointError, match=r"must be a str or os\.PathLike giving a str"):
        npattn.load(IntPath())


def test_a_nul_byte_is_named(tmp_path):
    with pytest.raises(CheckpointError, match=r"holds a NUL byte, which no file name can hold"):
        npattn.save({"w": np.ones(1)}, str(tmp_path / "a\x00b.npz"))
