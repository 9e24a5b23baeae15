"""Malformed headers NumPy's or JSON's parser fails on in unusual ways are CheckpointErrors: an .npy
member header with an unbalanced bracket (tokenize.TokenError), a descr such as ',f4' (SyntaxError),
a .safetensors header nested 100,000 deep (RecursionError), and JSON integers of over 4300 digits
(Python's advice about sys.set_int_max_str_digits is not repeated)."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _edited_npz(edit):
    npattn.save(npattn.MultiHeadAttention(3, 2, 4, 0.0, 2, qkv_bias=True, rng=7), "good.npz")
    raw = bytearray(open("good.npz", "rb").read())
    edit(raw)
    open("bad.npz", "wb").write(raw)
    return "bad.npz"


def test_an_npy_header_with_an_unbalanced_bracket():
    def edit(raw):  # the header-length byte of the first member one larger: the header ends inside a bracket
        raw[raw.index(b"\x93NUMPY") + 8] ^= 0x01

    for reader in (npattn.load, npattn.load_metadata):
        with pytest.raises(CheckpointError, match=r"malformed \.npy header"):
            reader(_edited_npz(edit))


def test_an_npy_header_whose_descr_is_no_python():
    def edit(raw):  # '<U...' becomes ',U...' in the first member's header
        raw[raw.index(b"\x93NUMPY") + 21] ^= 0x10

    with pytest.raises(CheckpointError, match=r"malformed .npy header \(SyntaxError"):
        npattn.load(_edited_npz(edit))


def test_a_deeply_nested_safetensors_header():
    header = ('{"a":' * 100000 + "1" + "}" * 100000).encode()
    open("deep.safetensors", "wb").write(struct.pack("<Q", len(header)) + header)
    for reader in (npattn.load, npattn.load_metadata):
        with pytest.raises(CheckpointError, match=r"its header is not JSON \(nested too deeply"):
            reader("deep.safetensors")


def test_a_safetensors_header_with_a_huge_integer():
    header = ('{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"__metadata__":{"x":' + "9" * 5000 + "}}").encode()
    open("big.safetensors", "wb").write(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(CheckpointError, match="an integer of over 4300 digits") as info:
        npattn.load("big.safetensors")
    assert "set_int_max_str_digits" not in str(info.value)


def test_negative_sizes_are_named_as_such():
    npattn.save({"W": np.zeros((3, 2))}, "good.npz")
    with zipfile.ZipFile("good.npz") as src, zipfile.ZipFile("neg.npz", "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():  # rezipped: the member's CRC-32 is the edited bytes'
            data = src.read(info)
            edited = data.replace(b"(3, 2), }  ", b"(-3,-2), } ")
            dst.writestr(info.filename, edited if info.filename == "W.npy" else data)
    with pytest.raises(CheckpointError, match=r"member 'W' declares shape \(-3, -2\), with a negative size"):
        npattn.load("neg.npz")
    cases = (([1], [-4, 0], r"a negative data_offsets \[-4, 0\]"), ([-1], [0, 8], "negative shape"))
    for shape, offsets, said in cases:
        header = json.dumps({"w": {"dtype": "F64", "shape": shape, "data_offsets": offsets}}).encode()
        open("neg.safetensors", "wb").write(struct.pack("<Q", len(header)) + header + bytes(8))
        with pytest.raises(CheckpointError, match=said):
            npattn.load("neg.safetensors")


def test_an_all_zero_safetensors_file_is_named_empty():
    open("zero.safetensors", "wb").write(bytes(64))
    with pytest.raises(CheckpointError, match=r"its header is empty \(its length, the first 8 bytes, is 0\)"):
        npattn.load("zero.safetensors")


def test_an_archive_glued_behind_another_or_behind_pk_bytes_is_refused():
    npattn.save({"w": np.zeros(2)}, "a.npz")
    npattn.save({"w": np.ones(2)}, "b.npz")
    second = open("b.npz", "rb").read()
    empty = io.BytesIO()
    zipfile.ZipFile(empty, "w").close()
    for name, prefix in (("ab.npz", open("a.npz", "rb").read()), ("pk.npz", b"PK\x03\x04" + b"J" * 60),
                         ("ez.npz", empty.getvalue())):  # fmt: skip
        open(name, "wb").write(prefix + second)
        for reader in (npattn.load, npattn.load_metadata):
            with pytest.raises(CheckpointError, match="has bytes before the zip archive"):
                reader(name)


def test_a_run_never_replaces_an_archive_glued_in_front_of_a_checkpoint(tmp_path):
    np.savez("data.npz", precious=np.arange(5.0))
    npattn.train_task(steps=2, save="run.npz")
    combo = open("data.npz", "rb").read() + open("run.npz", "rb").read()
    open("combo.npz", "wb").write(combo)
    with pytest.raises(CheckpointError, match="has bytes before the zip archive"):
        npattn.train_task(steps=3, save="combo.npz")
    assert open("combo.npz", "rb").read() == combo
