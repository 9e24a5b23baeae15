"""A plain .npz checkpoint's index records each member's CRC-32 (in its tree entry, covered by
``index_sha256``), and loading compares it with the zip directory's: two same-shape members
swapped, or one replaced, is refused naming the member; a file written before (no CRCs) loads as it
did."""

import io
import json
import zipfile

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.nn import SelfAttention_v1
from npattn.train import checkpoint_index


def _saved(tmp_path):
    path = tmp_path / "m.npz"
    model = SelfAttention_v1(3, 2, rng=np.random.default_rng(0))
    npattn.save(model, path)
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    return path, model.state_dict(), members


def _rezip(path, members):
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members.items():
            out.writestr(name, data)


def _npy(arr):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, arr, allow_pickle=False)
    return buffer.getvalue()


def _with_index(members, edit):
    """The members with the index edited by ``edit`` and its ``index_sha256`` made to match."""
    index = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    edit(index)
    index["index_sha256"] = checkpoint_index.index_sha256(index)
    return {**members, "__npattn__.npy": _npy(np.array(json.dumps(index)))}


def test_swapped_members_are_refused_naming_the_member(tmp_path):
    path, _, members = _saved(tmp_path)
    swapped = {**members, "W_query.npy": members["W_key.npy"], "W_key.npy": members["W_query.npy"]}
    _rezip(path, swapped)
    with pytest.raises(CheckpointError, match=r"member 'W_query' holds other contents than the index records"):
        npattn.load(path)
    with pytest.raises(CheckpointError, match=r"member 'W_query' holds other contents"):
        npattn.load_metadata(path)


def test_a_replaced_member_is_refused(tmp_path):
    path, state, members = _saved(tmp_path)
    _rezip(path, {**members, "W_value.npy": _npy(state["W_value"] + 1)})
    with pytest.raises(CheckpointError, match=r"'W_value' .*CRC-32 0x[0-9a-f]{8} in the zip directory, expected 0x"):
        npattn.load(path)


def test_each_array_entry_records_the_zip_crc(tmp_path):
    path, state, members = _saved(tmp_path)
    index = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    with zipfile.ZipFile(path) as z:
        directory = {info.filename[:-4]: info.CRC for info in z.infolist()}
    assert checkpoint_index.recorded_crc32(index["tree"]) == {n: directory[n] for n in state}


def test_removing_a_crc_is_refused(tmp_path):
    path, _, members = _saved(tmp_path)
    index = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    del index["tree"]["dict"][0][1]["crc32"]  # the index_sha256 left as written
    _rezip(path, {**members, "__npattn__.npy": _npy(np.array(json.dumps(index)))})
    with pytest.raises(CheckpointError, match="its index was edited after it was written"):
        npattn.load(path)


@pytest.mark.parametrize("bad", [True, -1, 1 << 32, "0", 1.5])
def test_a_crc_of_the_wrong_type_is_a_corrupt_entry(tmp_path, bad):
    path, _, members = _saved(tmp_path)
    _rezip(path, _with_index(members, lambda index: index["tree"]["dict"][0][1].update(crc32=bad)))
    with pytest.raises(CheckpointError, match="corrupt tree entry"):
        npattn.load(path)


def test_a_file_written_before_the_crcs_loads_as_it_did(tmp_path):
    path, state, members = _saved(tmp_path)

    def drop(index):
        for node in checkpoint_index.array_nodes(index["tree"]):
            del node["crc32"]

    old = _with_index(members, drop)
    _rezip(path, {**old, "W_query.npy": members["W_key.npy"], "W_key.npy": members["W_query.npy"]})
    loaded = npattn.load(path)  # unchecked, as before
    np.testing.assert_array_equal(loaded["W_query"], state["W_key"])
