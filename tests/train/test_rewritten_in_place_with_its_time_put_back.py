"""A checkpoint rewritten in place between a run's saves, same size, with its mtime put back (as
``touch -r`` does), is refused as any edit is: the guard also compares the ctime, which no program
can put back (it was replaced by the run's next save). The run's own saves are never refused."""

import os

import numpy as np
import pytest

from npattn.errors import CheckpointError
from npattn.train import train_task


def test_an_edit_that_puts_the_mtime_back_stops_the_run(tmp_path):
    path = tmp_path / "r.npz"

    def on_log(step, loss, history):
        if step == 6:
            st = os.stat(path)
            with open(path, "r+b") as f:
                f.write(b"U" * st.st_size)  # someone's data: same inode, same size
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    with pytest.raises(CheckpointError, match=r"its size and mtime as they were, its ctime not.*never replaced"):
        train_task("teacher-student", steps=14, save=str(path), save_every=2, log_every=2, on_log=on_log)
    assert path.read_bytes() == b"U" * path.stat().st_size


def test_a_run_saving_at_every_step_replaces_its_own_file(tmp_path):
    path = tmp_path / "r.npz"
    train_task("teacher-student", steps=12, save=str(path), save_every=1)
    resumed, _, _, _ = train_task(resume=str(path), save=str(path), steps=14, save_every=1)
    assert np.isfinite(resumed.W_query.data).all()


@pytest.mark.parametrize("change", ["chmod", "hard link"])
def test_a_change_of_mode_or_a_hard_link_made_mid_run_lets_the_run_go_on(tmp_path, change):
    path = tmp_path / "r.npz"

    def on_log(step, loss, history):
        if step == 6:
            if change == "chmod":
                os.chmod(path, 0o600)
            else:
                os.link(path, tmp_path / "backup.npz")

    train_task("teacher-student", steps=14, save=str(path), save_every=2, log_every=2, on_log=on_log)
    if change == "chmod":
        assert path.stat().st_mode & 0o777 == 0o600
    else:
        from npattn import load

        assert load(str(tmp_path / "backup.npz"))["step"] == 4 and load(str(path))["step"] == 14
