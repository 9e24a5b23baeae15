"""A run never writes a checkpoint its own resume refuses, and never one a callback edited:
``train_task`` gives ``on_log`` a copy of the history, so a callback's edits, consistent or not,
reach neither the run's record nor its checkpoints; the history is still checked as ``--resume``
checks it before every save."""

import numpy as np
import pytest

from npattn.errors import TrainingError
from npattn.train import checkpoint, command
from npattn.train.command import train_task


def _edit_loss(step, loss, history) -> None:
    history.loss[0] = -5.0


def _scale_loss(step, loss, history) -> None:
    history.loss[0] *= 2.0  # consistent: still a loss >= 0, so no resume check could tell


def _plain_run(tmp_path, steps: int) -> dict:
    path = str(tmp_path / "plain.npz")
    train_task("teacher-student", steps=steps, log_every=5, save=path)
    return checkpoint.load(path)["history"]


@pytest.mark.parametrize("edit", [_edit_loss, _scale_loss], ids=["negative", "consistent"])
def test_a_callbacks_edit_reaches_neither_the_run_nor_its_checkpoint(tmp_path, edit) -> None:
    path = str(tmp_path / "cb.npz")
    _, _, history, _ = train_task("teacher-student", steps=20, log_every=5, on_log=edit, save=path)
    expected = _plain_run(tmp_path, 20)
    np.testing.assert_array_equal(checkpoint.load(path)["history"]["loss"], expected["loss"])
    np.testing.assert_array_equal(history.loss, expected["loss"])


def test_a_late_edit_of_the_logged_weights_leaves_the_run_resumable(tmp_path) -> None:
    path = str(tmp_path / "cb.npz")

    def edit_late(step, loss, history) -> None:
        if step == 10:
            history.last_log[next(iter(history.last_log))] += 1.0  # weights the run never had

    train_task("teacher-student", steps=12, log_every=5, save_every=5, on_log=edit_late, save=path)
    assert checkpoint.load(path)["step"] == 12
    _, _, history, _ = train_task(steps=14, resume=path, save=path, log_every=5)
    assert len(history.loss) == 14 and np.all(np.asarray(history.loss) >= 0)


def test_a_history_changed_before_a_save_is_still_refused(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "cb.npz")
    real_fit = command.fit

    def fit_that_edits(*args, on_step, **kwargs):
        def edit_then_save(step, history):
            history.loss[0] = -5.0
            on_step(step, history)

        return real_fit(*args, on_step=edit_then_save, **kwargs)

    monkeypatch.setattr(command, "fit", fit_that_edits)
    message = r"step 5: history\.loss\[0\] is -5\.0; .*state was changed outside its own steps.*not written"
    with pytest.raises(TrainingError, match=message):
        train_task("teacher-student", steps=5, save=path)


def test_a_callback_that_only_reads_saves_as_before(tmp_path) -> None:
    path = str(tmp_path / "ok.npz")
    seen = []
    train_task("teacher-student", steps=6, log_every=2, save_every=2, on_log=lambda s, l, h: seen.append(s), save=path)
    assert seen == [2, 4, 6] and checkpoint.load(path)["step"] == 6
