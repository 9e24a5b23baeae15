"""A safetensors file with bytes after its last tensor was reported as "truncated, corrupt or not a
safetensors file": it is longer than its header describes, and the message now says so."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError

pytest.importorskip("safetensors")


def test_bytes_appended_are_named(tmp_path):
    path = tmp_path / "w.safetensors"
    npattn.save({"w": np.arange(3.0)}, path)
    with open(path, "ab") as f:
        f.write(b"xyz")
    with pytest.raises(CheckpointError, match=r"has 3 byte\(s\) after the data its header describes"):
        npattn.load(path)
    path.write_bytes(path.read_bytes()[:-3])
    np.testing.assert_array_equal(npattn.load(path)["w"], np.arange(3.0))


def test_bytes_after_a_header_with_no_tensors_are_named(tmp_path):
    path = tmp_path / "empty.safetensors"
    npattn.save({}, path)
    npattn.load(path)
    with open(path, "ab") as f:
        f.write(b"!")
    with pytest.raises(CheckpointError, match=r"has 1 byte\(s\) after the data its header describes"):
        npattn.load(path)


def test_offsets_that_are_not_integers_get_the_librarys_diagnosis(tmp_path):
    import json

    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": ["0", "16"]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))
    with pytest.raises(CheckpointError, match=r'invalid type: string "0"') as info:
        npattn.load(path)
    assert "after the data" not in str(info.value)
