"""A checkpoint target the OS will not let us replace is worded by its cause: no write bits (the
file is read-only), a read-only mount, or else (an immutable flag, an ACL) -- before, every case
said "the file is read-only", also for a file of mode 644."""

import os
import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError


def _target(tmp_path):
    path = tmp_path / "x.npz"
    npattn.save({"w": np.ones(2)}, path)
    os.chmod(path, 0o644)
    return path


def _denied(monkeypatch, path):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **k: False if os.fspath(p) == str(path) else real_access(p, m, **k))


def test_a_read_only_mount_is_named(tmp_path, monkeypatch):
    path = _target(tmp_path)
    _denied(monkeypatch, path)
    monkeypatch.setattr(os, "statvfs", lambda p: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(CheckpointError, match=r"x\.npz': the filesystem is mounted read-only$"):
        npattn.save({"w": np.ones(2)}, path)


def test_a_writable_mode_denied_is_not_called_read_only(tmp_path, monkeypatch):
    path = _target(tmp_path)
    _denied(monkeypatch, path)
    with pytest.raises(CheckpointError, match=r"the file cannot be replaced \(permission denied: an immutable flag"):
        npattn.save({"w": np.ones(2)}, path)


def test_no_write_bits_is_still_read_only(tmp_path):
    path = _target(tmp_path)
    os.chmod(path, 0o444)
    with pytest.raises(CheckpointError, match=r"permission denied \(the file is read-only\)"):
        npattn.save({"w": np.ones(2)}, path)


def test_an_immutable_file(tmp_path):
    path = _target(tmp_path)
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", path], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here (needs root on a filesystem with the flag)")
    try:
        with pytest.raises(CheckpointError, match=r"x\.npz': the file cannot be replaced \(permission denied"):
            npattn.save({"w": np.ones(2)}, path)
    finally:
        subprocess.run(["chattr", "-i", path], check=True)


def test_a_new_file_in_a_folder_on_a_read_only_mount(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    _denied(monkeypatch, folder)
    monkeypatch.setattr(os, "statvfs", lambda p: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(CheckpointError, match=r"the folder '.*ro' is on a read-only filesystem$"):
        npattn.save({"w": np.ones(2)}, folder / "new.npz")
