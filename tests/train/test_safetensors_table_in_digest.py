"""A .safetensors checkpoint's digest covers its tensor table (names, dtypes, shapes,
data_offsets): swapping two tensors' offsets (W_query <-> W_key), or removing the table's digest,
is refused; a file whose digest covers the metadata only (written before) still loads."""

import json

import numpy as np
import pytest
from safetensors_bytes import joined, split

import npattn
from npattn.errors import CheckpointError
from npattn.nn import SelfAttention_v2
from npattn.train import checkpoint_index

pytest.importorskip("safetensors")




def _saved(tmp_path):
    path = tmp_path / "m.safetensors"
    npattn.save(SelfAttention_v2(3, 2, rng=np.random.default_rng(0)), path)
    return path


def test_swapped_offsets_are_refused(tmp_path):
    path = _saved(tmp_path)
    header, body = split(path.read_bytes())
    q, k = header["W_query.weight"], header["W_key.weight"]
    q["data_offsets"], k["data_offsets"] = k["data_offsets"], q["data_offsets"]
    path.write_bytes(joined(header, body))
    with pytest.raises(CheckpointError, match=r"its tensor table \(names, dtypes, shapes, data_offsets\) was edited"):
        npattn.load(path)


def test_removing_the_table_digest_is_refused(tmp_path):
    path = _saved(tmp_path)
    header, body = split(path.read_bytes())
    del header["__metadata__"]["tensors_sha256"]
    path.write_bytes(joined(header, body))
    with pytest.raises(CheckpointError, match="its index was edited after it was written"):
        npattn.load(path)


def test_a_file_whose_digest_covers_the_metadata_only_still_loads(tmp_path):
    path = _saved(tmp_path)
    state = npattn.load(path)
    header, body = split(path.read_bytes())
    meta = header["__metadata__"]
    del meta["tensors_sha256"]
    extra = json.loads(meta["npattn"])
    extra["index_sha256"] = checkpoint_index.index_sha256(
        {"format": checkpoint_index.FORMAT, "version": checkpoint_index.VERSION, **extra}
    )
    meta["npattn"] = json.dumps(extra)
    path.write_bytes(joined(header, body))
    old = npattn.load(path)
    assert list(old) == list(state) and all(np.array_equal(old[k], state[k]) for k in state)
