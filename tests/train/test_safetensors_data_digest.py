"""A .safetensors checkpoint's digest covers each tensor's data bytes (``data_sha256`` in
``__metadata__``, bound into ``index_sha256``): a changed data byte is refused naming the file and the
tensor, removing the data digests is refused, and a file written before them (table digest only)
still loads as it did."""

import json

import numpy as np
import pytest
from safetensors_bytes import joined, split

import npattn
from npattn.errors import CheckpointError
from npattn.nn import SelfAttention_v1
from npattn.train import checkpoint_index, safetensors_io

pytest.importorskip("safetensors")




def _saved(tmp_path):
    path = tmp_path / "m.safetensors"
    model = SelfAttention_v1(3, 2, rng=np.random.default_rng(0))
    npattn.save(model, path)
    return path, model.state_dict()


def test_the_flipped_last_byte_is_refused_naming_the_tensor(tmp_path):
    path, _ = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40  # the last byte of W_value: loaded as 1e38 before
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"m\.safetensors'?: the data of tensor 'W_value' no longer matches"):
        npattn.load(path)
    with pytest.raises(CheckpointError, match="the data of tensor 'W_value'"):
        npattn.load_metadata(path)


def test_no_flipped_byte_of_the_data_loads_as_other_weights(tmp_path):
    path, _ = _saved(tmp_path)
    good = path.read_bytes()
    _, body = split(good)
    start = len(good) - len(body)
    for i in range(start, len(good)):
        for bit in (0x01, 0x40):
            data = bytearray(good)
            data[i] ^= bit
            path.write_bytes(bytes(data))
            with pytest.raises(CheckpointError, match="no longer matches its SHA-256 in 'data_sha256'"):
                npattn.load(path)


def test_removing_the_data_digests_is_refused(tmp_path):
    path, _ = _saved(tmp_path)
    header, body = split(path.read_bytes())
    del header["__metadata__"]["data_sha256"]
    path.write_bytes(joined(header, body))
    with pytest.raises(CheckpointError, match="its index was edited after it was written"):
        npattn.load(path)


def test_a_file_written_before_the_data_digests_loads_as_before(tmp_path):
    path, state = _saved(tmp_path)
    header, body = split(path.read_bytes())
    meta = header["__metadata__"]
    del meta["data_sha256"]
    extra = json.loads(meta["npattn"])
    index = checkpoint_index.index_sha256({"format": "npattn-checkpoint", "version": 1, **extra})
    extra["index_sha256"] = safetensors_io._with_table(index, meta["tensors_sha256"])
    meta["npattn"] = json.dumps(extra)
    body = body[:-1] + bytes([body[-1] ^ 0x40])  # unchecked, as it was
    path.write_bytes(joined(header, body))
    loaded = npattn.load(path)
    assert list(loaded) == list(state)
    np.testing.assert_array_equal(loaded["W_query"], state["W_query"])
    assert loaded["W_value"][-1, -1] != state["W_value"][-1, -1]


def test_the_saved_file_still_loads_exactly(tmp_path):
    path, state = _saved(tmp_path)
    header, _ = split(path.read_bytes())
    assert sorted(json.loads(header["__metadata__"]["data_sha256"])) == sorted(state)
    loaded = npattn.load(path)
    for name in state:
        np.testing.assert_array_equal(loaded[name], state[name])
