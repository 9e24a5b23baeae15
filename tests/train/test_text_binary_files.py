"""A binary file given as the run's text is named as binary (a checkpoint, a program, NUL bytes),
not as text in another encoding: the advice to convert it from latin-1 would train on garbage."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.train import read_text


def test_a_checkpoint_is_named_as_a_zip_archive(tmp_path):
    npattn.save({"w": np.arange(300.0)}, tmp_path / "run.npz")
    with pytest.raises(ConfigError, match=r"it is a zip archive \(an npattn checkpoint or .npz\?\), not text") as info:
        read_text(tmp_path / "run.npz")
    assert "iconv" not in str(info.value)


def test_nul_bytes_are_named(tmp_path):
    (tmp_path / "data.bin").write_bytes(b"abc\x00\x00\xff\xfe" * 10)
    with pytest.raises(ConfigError, match="it holds NUL bytes, as a binary file does"):
        read_text(tmp_path / "data.bin")


def test_latin1_text_still_gets_the_conversion_advice(tmp_path):
    (tmp_path / "t.txt").write_bytes("café au lait".encode("latin1"))
    with pytest.raises(ConfigError, match="iconv -f latin1 -t utf-8"):
        read_text(tmp_path / "t.txt")
