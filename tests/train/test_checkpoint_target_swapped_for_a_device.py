"""A checkpoint target swapped for a symlink to /dev/null while it is saved is refused and left as
it is: the type and the mode come from one stat, and the target is checked again just before the
rename.

The type check and the mode copy used to happen at different moments: a link planted between them
was replaced by a regular file with the mode copied from /dev/null (0o666, world-writable).
"""

import os
import stat

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.train import atomic

DEVNULL = os.devnull


def _plant_link_after(monkeypatch, name, path):
    """Run atomic's ``name`` as it is, then replace ``path`` with a symlink to /dev/null."""
    original = getattr(atomic, name)

    def swapped(*args, **kwargs):
        result = original(*args, **kwargs)
        if not os.path.islink(path):
            os.unlink(path)
            os.symlink(DEVNULL, path)
        return result

    monkeypatch.setattr(atomic, name, swapped)


@pytest.mark.skipif(not os.path.exists(DEVNULL) or os.name != "posix", reason="needs /dev/null and symlinks")
@pytest.mark.parametrize("point", ["check_target", "temp_file"])  # before the mode is read / after it
def test_a_target_swapped_for_a_device_link_is_refused_and_kept(tmp_path, monkeypatch, point):
    path = tmp_path / "r.npz"
    npattn.save({"w": np.ones(2)}, path)
    os.chmod(path, 0o600)
    _plant_link_after(monkeypatch, point, str(path))
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*r\.npz.*(character device|symlink)"):
        atomic.atomic_write(path, b"new bytes")  # what save calls after its own checks
    assert os.path.islink(path) and os.readlink(path) == DEVNULL  # the link stays, never replaced
    assert [p.name for p in tmp_path.iterdir()] == ["r.npz"]  # no temporary file left


@pytest.mark.skipif(os.name != "posix", reason="needs symlinks")
def test_a_target_that_became_a_link_to_a_regular_file_is_refused(tmp_path, monkeypatch):
    path, other = tmp_path / "r.npz", tmp_path / "other.npz"
    npattn.save({"w": np.ones(2)}, path)
    npattn.save({"w": np.ones(3)}, other)
    original = atomic.temp_file

    def swapped(real, *args):
        os.unlink(path)
        os.symlink(other, path)
        return original(real, *args)

    monkeypatch.setattr(atomic, "temp_file", swapped)
    with pytest.raises(CheckpointError, match="it became a symlink while the new file was written"):
        npattn.save({"w": np.zeros(2)}, path)
    assert os.path.islink(path)
    np.testing.assert_array_equal(npattn.load(other)["w"], np.ones(3))


def test_a_regular_target_keeps_its_mode(tmp_path):
    path = tmp_path / "r.npz"
    npattn.save({"w": np.ones(2)}, path)
    os.chmod(path, 0o640)
    npattn.save({"w": np.zeros(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    np.testing.assert_array_equal(npattn.load(path)["w"], np.zeros(2))
