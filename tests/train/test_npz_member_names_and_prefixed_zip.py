"""An .npz member that is an .npy array but lacks the '.npy' suffix is named as such, and a zip with
bytes in front of it (self-extracting style) is refused as that, not as "not a zip archive"."""

import zipfile

import pytest

import npattn
from npattn.errors import CheckpointError


def _saved(tmp_path):
    path = tmp_path / "m.npz"
    npattn.save(npattn.nn.SelfAttention_v1(3, 2), path)
    return path


def _renamed(src, dst, rename):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(rename(info.filename), zin.read(info))


def test_a_member_without_the_npy_suffix_is_named_as_an_npy_array(tmp_path):
    path = _saved(tmp_path)
    out = tmp_path / "noext.npz"
    _renamed(path, out, lambda name: "W_key" if name == "W_key.npy" else name)
    with pytest.raises(
        CheckpointError, match=r"member 'W_key' is an \.npy array, but its name lacks the '\.npy' suffix "
        r"\(expected 'W_key\.npy'\)"
    ):  # fmt: skip
        npattn.load(out)


@pytest.mark.parametrize("name, data", [("notes.txt", b"hello"), ("sub/", b"")])
def test_a_member_that_is_not_an_npy_array_is_still_said_to_be_one(tmp_path, name, data):
    path = _saved(tmp_path)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(name, data)
    with pytest.raises(CheckpointError, match=rf"member '{name}' is not an \.npy array"):
        npattn.load(path)


def test_bytes_before_the_zip_are_named(tmp_path):
    path = _saved(tmp_path)
    path.write_bytes(b"JUNKJUNK" + path.read_bytes())
    assert zipfile.is_zipfile(path)
    with pytest.raises(CheckpointError, match=r"has bytes before the zip archive \(it starts with b'JUNKJUNK'"):
        npattn.load(path)


def test_bytes_that_are_no_zip_at_all_are_still_not_a_zip(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"JUNKJUNK" * 10)
    with pytest.raises(CheckpointError, match=r"not a zip archive \(it starts with b'JUNKJUNK'\)"):
        npattn.load(path)

