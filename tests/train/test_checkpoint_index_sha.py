"""A checkpoint's index (class, config, metadata, tree) carries its own SHA-256: an index edited
inside the file (a MultiHeadAttention's num_heads 2 -> 1 keeps every shape, so the rebuilt module
would load and compute something else) is refused, and so is an index without the entry."""

import io
import json
import zipfile

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError


def _rewrite_index(path, edit):
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    header = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    edit(header)
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.array(json.dumps(header)), allow_pickle=False)
    members["__npattn__.npy"] = buffer.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_an_edited_index_is_refused(tmp_path):
    path = tmp_path / "mha.npz"
    npattn.save(npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=1), path)
    assert npattn.load_metadata(path)["config"]["num_heads"] == 2
    _rewrite_index(path, lambda h: h["config"].update(num_heads=1))
    for read in (npattn.load, npattn.load_metadata):
        with pytest.raises(CheckpointError, match=r"its index was edited after it was written"):
            read(path)


def test_an_index_without_the_entry_is_refused(tmp_path):
    """Removing the entry would turn the check off: the class and config below are forged."""
    path = tmp_path / "forged.npz"
    npattn.save(npattn.SelfAttention_v1(3, 2, rng=1), path)

    def forge(header):
        header.pop("index_sha256")
        header.update({"class": "SelfAttention_v2", "config": {"d_in": 3, "d_out": 2, "qkv_bias": True}})

    _rewrite_index(path, forge)
    for read in (npattn.load, npattn.load_metadata):
        with pytest.raises(CheckpointError, match=r"its index has no 'index_sha256'"):
            read(path)


def test_metadata_cannot_set_the_entry(tmp_path):
    with pytest.raises(CheckpointError, match=r"reserved"):
        npattn.save({"w": np.zeros(2)}, tmp_path / "x.npz", metadata={"index_sha256": "0" * 64})
