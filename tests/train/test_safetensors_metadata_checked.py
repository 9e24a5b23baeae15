"""The npattn metadata inside a ``.safetensors`` file goes through the .npz index's own check and
carries its ``index_sha256``, and every reserved metadata key is refused in both formats.

A hand edit of ``__metadata__["npattn"]`` (another class, a config that does not fit the weights,
a config that is not an object) used to be returned by ``load_metadata`` as it was; the key
``'order'`` given as user metadata was silently dropped from a .safetensors file.
"""

import json
import struct

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.train.checkpoint_index import RESERVED


def _save(tmp_path):
    pytest.importorskip("safetensors")
    model = npattn.nn.SelfAttention_v1(3, 2)
    path = tmp_path / "m.safetensors"
    npattn.save(model, path, metadata={"note": "x"})
    return model, path


def _edit_npattn_meta(path, edit, old=False):
    """Rewrite the header's "npattn" string with ``edit(dict)``, keeping the tensors (no re-signing);
    ``old``: also drop the tensor table's digest, as files written before it was recorded lack it."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    if old:
        del header["__metadata__"]["tensors_sha256"]
    extra = json.loads(header["__metadata__"]["npattn"])
    edit(extra)
    header["__metadata__"]["npattn"] = json.dumps(extra)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n :])


def test_a_saved_file_round_trips_with_its_digest_hidden(tmp_path):
    model, path = _save(tmp_path)
    meta = npattn.load_metadata(path)
    assert meta == {
        "format": "npattn-checkpoint", "version": 1, "class": "SelfAttention_v1",
        "config": {"d_in": 3, "d_out": 2}, "note": "x",
    }  # fmt: skip
    for key, value in npattn.load(path).items():
        np.testing.assert_array_equal(value, model.state_dict()[key])


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update({"class": "GPTModel"}),
        lambda m: m.update({"config": {"d_in": 4, "d_out": 2}}),
        lambda m: m.update({"note": "y"}),
    ],
    ids=["class", "config", "note"],
)
def test_a_hand_edit_is_refused(tmp_path, edit):
    _, path = _save(tmp_path)
    _edit_npattn_meta(path, edit)
    for read in (npattn.load_metadata, npattn.load):
        with pytest.raises(CheckpointError, match=r"edited after it was written.*index_sha256"):
            read(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m.update({"config": "x"}), "'config' must be an object, got 'x'"),
        (lambda m: m.update({"class": 3}), "'class' must be a string or null, got 3"),
        (lambda m: m.update({"index_sha256": 7}), "'index_sha256' must be a string, got 7"),
        (lambda m: m.update({"order": "W_key"}), "'order' must be a list of tensor names"),
        (lambda m: m.update({"tree": {}}), r"it sets \['tree'\]"),
    ],
    ids=["config", "class", "digest", "order", "tree"],
)
def test_entries_of_the_wrong_type_are_refused_with_or_without_the_digest(tmp_path, edit, message):
    _, path = _save(tmp_path)
    _edit_npattn_meta(path, edit)
    with pytest.raises(CheckpointError, match=message):
        npattn.load_metadata(path)
    _edit_npattn_meta(path, lambda m: m.pop("index_sha256", None))
    if "index_sha256" not in message:  # (the digest itself is the entry removed here)
        with pytest.raises(CheckpointError, match=message):
            npattn.load_metadata(path)


def test_a_file_written_before_the_digest_still_loads(tmp_path):
    model, path = _save(tmp_path)
    _edit_npattn_meta(path, lambda m: m.pop("index_sha256"), old=True)
    assert npattn.load_metadata(path)["class"] == "SelfAttention_v1"
    assert list(npattn.load(path)) == list(model.state_dict())


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("key", RESERVED)
def test_every_reserved_key_is_refused_in_both_formats_before_writing(tmp_path, suffix, key):
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    path = tmp_path / f"m{suffix}"
    with pytest.raises(CheckpointError, match=rf"metadata keys \['{key}'\] are reserved"):
        npattn.save(npattn.nn.SelfAttention_v1(3, 2), path, metadata={key: ["W_key"]})
    assert not path.exists()
    assert "order" in RESERVED


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_other_keys_round_trip_in_both_formats(tmp_path, suffix):
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    path = tmp_path / f"m{suffix}"
    extra = {"orders": ["W_key"], "step": 3, "nested": {"a": [1, None]}}
    npattn.save(npattn.nn.SelfAttention_v1(3, 2), path, metadata=extra)
    meta = npattn.load_metadata(path)
    assert {k: meta[k] for k in extra} == extra
