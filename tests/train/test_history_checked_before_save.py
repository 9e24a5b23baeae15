"""A run never writes a checkpoint its own resume refuses: the history is checked as ``--resume``
checks it before every save, so one an ``on_log`` callback changed stops the run with a
TrainingError naming the entry, and nothing is written."""

import os

import numpy as np
import pytest

from npattn.errors import TrainingError
from npattn.train import checkpoint
from npattn.train.command import train_task


def _edit_loss(step, loss, history) -> None:
    history.loss[0] = -5.0


def test_a_loss_a_callback_changed_stops_the_run_unsaved(tmp_path) -> None:
    path = str(tmp_path / "cb.npz")
    message = r"step 20: history\.loss\[0\] is -5\.0; .*changed after it was recorded \(by a callback.*not written"
    with pytest.raises(TrainingError, match=message):
        train_task("teacher-student", steps=20, log_every=5, on_log=_edit_loss, save=path)
    assert not os.path.exists(path)


def test_an_earlier_checkpoint_stays_and_still_resumes(tmp_path) -> None:
    path = str(tmp_path / "cb.npz")

    def edit_late(step, loss, history) -> None:
        if step == 10:
            history.last_log[next(iter(history.last_log))] += 1.0  # weights the run never had

    with pytest.raises(TrainingError, match=r"step 10: history\.last_log\[.*a callback"):
        train_task("teacher-student", steps=12, log_every=5, save_every=5, on_log=edit_late, save=path)
    assert checkpoint.load(path)["step"] == 5
    _, _, history, _ = train_task(steps=12, resume=path, save=path, log_every=5)
    assert len(history.loss) == 12 and np.all(np.asarray(history.loss) >= 0)


def test_a_callback_that_only_reads_saves_as_before(tmp_path) -> None:
    path = str(tmp_path / "ok.npz")
    seen = []
    train_task("teacher-student", steps=6, log_every=2, save_every=2, on_log=lambda s, l, h: seen.append(s), save=path)
    assert seen == [2, 4, 6] and checkpoint.load(path)["step"] == 6
