"""Paths ``open()`` refuses are refused by ``save`` too (a last component '.' or '..', a folder
that does not exist before a '..'), and a target made read-only while the new file is written is
not replaced (the rename would undo the chmod)."""

import os
import re
import stat

import numpy as np
import pytest

import npattn


@pytest.mark.parametrize(
    "path, message",
    [
        ("x.npz/.", "the path ends in '.' (a folder)"),
        ("..", "the path ends in '..' (a folder)"),
        ("nosuch/../n.npz", "the folder 'nosuch/..' does not exist"),
    ],
)
def test_paths_open_refuses_are_refused(tmp_path, monkeypatch, path, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(npattn.CheckpointError, match=re.escape(message)):
        npattn.save({"w": np.ones(2)}, path)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
def test_a_target_made_read_only_during_the_write_is_kept(tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    npattn.save({"w": np.zeros(2)}, path)
    real_fsync = os.fsync

    def chmod_then_fsync(fd):
        os.chmod(path, 0o444)  # someone makes the checkpoint read-only while the new one is written
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", chmod_then_fsync)
    with pytest.raises(npattn.CheckpointError, match="it was made read-only while the new file was written"):
        npattn.save({"w": np.ones(2)}, path)
    monkeypatch.undo()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o444
    assert npattn.load(path)["w"].tolist() == [0.0, 0.0]
    assert sorted(os.listdir(tmp_path)) == ["run.npz"]


@pytest.mark.skipif(not hasattr(os, "kill") or os.name != "posix", reason="POSIX signals")
def test_sigterm_during_a_save_waits_for_the_save(tmp_path, monkeypatch):
    """SIGTERM (kill, timeout) mid-write left the temporary file: it now acts after the save."""
    import signal

    from npattn.train import atomic

    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(len(os.listdir(tmp_path))))
    real_fsync = os.fsync

    def terminated_then_fsync(fd):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the temporary file exists
        real_fsync(fd)

    try:
        monkeypatch.setattr(os, "fsync", terminated_then_fsync)
        with atomic.sigint_held():
            npattn.save({"w": np.ones(2)}, tmp_path / "run.npz")
            assert seen == []  # held
        monkeypatch.undo()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [1] and os.listdir(tmp_path) == ["run.npz"]  # delivered after: the save whole, no .tmp


def test_a_torch_tensor_in_a_state_says_how_to_save_it(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(npattn.CheckpointError, match=r"a torch tensor is saved as its array: tensor\.detach\(\)"):
        npattn.save({"w": torch.ones(2)}, tmp_path / "t.npz")


def test_a_safetensors_header_naming_a_tensor_twice_says_so(tmp_path):
    pytest.importorskip("safetensors")
    import struct

    entry = b'"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}'
    header = b"{" + entry + b"," + entry + b"}"
    path = tmp_path / "dup.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + np.ones(1).tobytes())
    with pytest.raises(npattn.CheckpointError, match=r"names the tensor\(s\) \['w'\] more than once"):
        npattn.load(path)


def test_a_torch_save_file_is_named_as_such(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"W_query": torch.randn(3, 2)}, tmp_path / "model.pt")
    with pytest.raises(npattn.CheckpointError, match=r"is a PyTorch torch\.save file \(a zip holding a pickle\)"):
        npattn.load(tmp_path / "model.pt")
    with pytest.raises(npattn.CheckpointError, match=r"after tensor\.float\(\) \(NumPy has no bfloat16\)"):
        npattn.save({"x": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "bf.npz")
