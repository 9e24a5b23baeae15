"""load_metadata of a .safetensors file another program wrote returns the file's own metadata, every
entry as written: all but 'format' and 'version' were dropped without a word."""

import numpy as np
import pytest

import npattn

st = pytest.importorskip("safetensors.numpy")


def test_a_foreign_files_metadata_comes_back_whole(tmp_path):
    st.save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "f.safetensors"),
                 metadata={"format": "pt", "note": "x", "epoch": "3"})  # fmt: skip
    assert npattn.load_metadata(tmp_path / "f.safetensors") == {
        "format": "pt", "version": None, "note": "x", "epoch": "3"
    }  # fmt: skip


def test_npattns_own_file_is_as_before(tmp_path):
    npattn.save({"a": np.ones(2)}, tmp_path / "h.safetensors", metadata={"note": "y"})
    meta = npattn.load_metadata(tmp_path / "h.safetensors")
    assert meta["format"] == "npattn-checkpoint" and meta["note"] == "y" and meta["version"] == 1
