"""A replaced checkpoint keeps its access control list and user.* extended attributes (the rename
dropped them, and the mode alone then gave the owning group the ACL mask's rights); a new one gets
what open() gives a new file, the folder's default ACL included (the umask was applied over it)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import npattn

pytestmark = pytest.mark.skipif(not hasattr(os, "setxattr"), reason="extended attributes (Linux)")


def _entry(tag, perm, qualifier=0xFFFFFFFF):
    return struct.pack("<HHI", tag, perm, qualifier)


ACL = struct.pack("<I", 2) + _entry(1, 6) + _entry(2, 6, 1234) + _entry(4, 4) + _entry(0x10, 6) + _entry(0x20, 0)
DEFAULT = struct.pack("<I", 2) + _entry(1, 7) + _entry(2, 6, 1234) + _entry(4, 5) + _entry(0x10, 7) + _entry(0x20, 4)


def _set(path, name, value):
    try:
        os.setxattr(path, name, value)
    except OSError as exc:
        pytest.skip(f"the filesystem refuses {name}: {exc.strerror}")


def test_a_replaced_checkpoint_keeps_its_acl_and_user_attributes(tmp_path):
    path = str(tmp_path / "a.npz")
    npattn.save({"w": np.ones(2)}, path)
    _set(path, "system.posix_acl_access", ACL)
    _set(path, "user.origin", b"lab")
    mode = os.stat(path).st_mode
    npattn.save({"w": np.zeros(2)}, path)
    assert os.getxattr(path, "system.posix_acl_access") == ACL
    assert os.getxattr(path, "user.origin") == b"lab"
    assert os.stat(path).st_mode == mode and np.array_equal(npattn.load(path)["w"], np.zeros(2))


def test_a_new_checkpoint_gets_what_open_gives(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    _set(str(folder), "system.posix_acl_default", DEFAULT)
    old = os.umask(0o077)
    try:
        npattn.save({"w": np.zeros(2)}, str(folder / "n.npz"))
        open(folder / "plain.bin", "w").close()
    finally:
        os.umask(old)
    ours, theirs = os.stat(folder / "n.npz"), os.stat(folder / "plain.bin")
    assert ours.st_mode == theirs.st_mode
    assert os.getxattr(folder / "n.npz", "system.posix_acl_access") == os.getxattr(
        folder / "plain.bin", "system.posix_acl_access"
    )


def _replace_a_private_file(tmp_path, spy):
    """Save over a 0600 checkpoint under umask 022, ``spy()`` installed between the two saves."""
    path = str(tmp_path / "private.npz")
    npattn.save({"w": np.ones(2)}, path)
    os.chmod(path, 0o600)
    spy()
    old = os.umask(0o022)
    try:
        npattn.save({"w": np.zeros(2)}, path)
    finally:
        os.umask(old)


def test_a_private_files_new_contents_are_never_readable_by_others(tmp_path, monkeypatch):
    from npattn.train import atomic

    seen = []
    real_fdopen = os.fdopen

    class Spy:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            seen.append(os.fstat(self.f.fileno()).st_mode & 0o777)
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

    _replace_a_private_file(
        tmp_path, lambda: monkeypatch.setattr(atomic.os, "fdopen", lambda fd, mode: Spy(real_fdopen(fd, mode)))
    )
    assert seen and all(mode == 0o600 for mode in seen), [oct(m) for m in seen]


def test_the_temporary_file_of_a_replaced_private_file_is_private_from_its_creation(tmp_path, monkeypatch):
    from npattn.train import atomic

    created = []
    original = atomic.temp_file

    def spy(real, *args):
        fd, name = original(real, *args)
        created.append(os.fstat(fd).st_mode & 0o777)
        return fd, name

    _replace_a_private_file(tmp_path, lambda: monkeypatch.setattr(atomic, "temp_file", spy))
    assert created == [0o600], [oct(m) for m in created]
