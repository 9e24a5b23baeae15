"""A tokenizer file with a UTF-8 byte-order mark loads (``--text`` drops a BOM too), and a
``.safetensors`` header whose byte range does not fit a tensor names that tensor.

The BOM used to be refused with Python's "Unexpected UTF-8 BOM (decode using utf-8-sig)"; offsets
past the end of the file or a dtype whose size does not match the bytes gave the library's
"invalid shape, data type, or offset for tensor" without the tensor's name.
"""

import codecs
import json
import re
import struct

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.train.tokenizer_files import load_tokenizer, save_tokenizer
from npattn.train.tokenizers import train_tokenizer


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_a_tokenizer_file_with_a_bom_loads(tmp_path, kind):
    tok = train_tokenizer(kind, "the cat sat on the mat, the cat sat on the mat", 260 if kind == "bpe" else None)
    path = tmp_path / "tok.json"
    save_tokenizer(tok, path)
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    assert load_tokenizer(path).to_dict() == tok.to_dict()


def test_a_tokenizer_file_that_is_not_utf8_is_still_refused(tmp_path):
    path = tmp_path / "tok.json"
    path.write_bytes(json.dumps({"kind": "char", "chars": "ab"}).encode("utf-16"))
    with pytest.raises(CheckpointError, match="cannot read the tokenizer file"):
        load_tokenizer(path)


def _edited(tmp_path, edit):
    pytest.importorskip("safetensors")
    state = {"W_query": np.arange(6.0).reshape(3, 2), "W_key": np.ones((2, 2))}
    path = tmp_path / "w.safetensors"
    npattn.save(state, path)
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    edit(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])
    return path, len(raw) - 8 - n


def test_offsets_past_the_end_name_the_tensor(tmp_path):
    path, body = _edited(tmp_path, lambda h: h["W_query"].update(data_offsets=[0, 10**12]))
    message = f"tensor 'W_query' has data_offsets [0, {10**12}]; expected 0 <= start <= end <= {body}"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        npattn.load(path)


def test_reversed_offsets_name_the_tensor(tmp_path):
    path, _ = _edited(tmp_path, lambda h: h["W_key"].update(data_offsets=h["W_key"]["data_offsets"][::-1]))
    with pytest.raises(CheckpointError, match=re.escape("tensor 'W_key' has data_offsets [")):
        npattn.load(path)


def test_a_dtype_whose_size_does_not_match_names_the_tensor(tmp_path):
    path, _ = _edited(tmp_path, lambda h: h["W_query"].update(dtype="F32"))
    message = "tensor 'W_query' has 48 bytes of data; its shape (3, 2) and dtype F32 need 24"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        npattn.load(path)


def _as_written_before_the_table_digest(header):
    """The header of a file whose ``index_sha256`` covers the metadata only (no 'tensors_sha256')."""
    from npattn.train.checkpoint_index import FORMAT, VERSION, index_sha256

    meta = header["__metadata__"]
    del meta["tensors_sha256"]
    extra = json.loads(meta["npattn"])
    extra["index_sha256"] = index_sha256({"format": FORMAT, "version": VERSION, **extra})
    meta["npattn"] = json.dumps(extra)


def test_an_unedited_file_and_a_consistent_reshape_still_load(tmp_path):
    """The extent check refuses no consistent shape; since the digest covers the tensor table, the
    reshape of a file that records it is told as an edit."""
    path, _ = _edited(tmp_path, lambda h: (h["W_query"].update(shape=[6]), _as_written_before_the_table_digest(h)))
    state = npattn.load(path)
    np.testing.assert_array_equal(state["W_query"], np.arange(6.0))
    path, _ = _edited(tmp_path, lambda h: h["W_query"].update(shape=[6]))
    with pytest.raises(CheckpointError, match=r"its tensor table .* was edited"):
        npattn.load(path)
