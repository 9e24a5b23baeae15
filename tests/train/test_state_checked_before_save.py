"""A run never writes a checkpoint its resume refuses: code that reaches the run's optimizer (or its
model) and changes its settings mid-run stopped nothing, and the checkpoint then refused to resume
("its optimizer's betas (0.5, 0.5) differs from the run's"). Every save now checks the optimizer's
settings and state as a resume does, and the earlier checkpoint stays."""


import numpy as np
import pytest

import npattn
from npattn.errors import TrainingError
from npattn.train import checkpoint
from npattn.train.command import train_task


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda opt: opt.param_groups[0].update(betas=(0.5, 0.5)), r"its optimizer's betas \(0\.5, 0\.5\) differs"),
        (lambda opt: opt.param_groups[0].update(lr=0.5), r"its optimizer's lr 0\.5 differs"),
        (lambda opt: opt.defaults.update(lr=0.5), r"the optimizer's default lr 0\.5 differs from the run's lr 0\.05"),
        (lambda opt: opt.state.clear(), r"step"),
    ],
    ids=["betas", "lr", "default lr", "state emptied"],
)
def test_a_changed_optimizer_stops_the_run_and_the_last_checkpoint_stays(tmp_path, monkeypatch, change, named):
    path = str(tmp_path / "run.npz")
    made = []
    real_adam = npattn.optim.Adam

    def adam(*args, **kwargs):
        made.append(real_adam(*args, **kwargs))
        return made[-1]

    monkeypatch.setitem(npattn.train.command.OPTIMIZERS, "adam", adam)

    def on_log(step, loss, history):
        if step == 10:
            change(made[0])

    with pytest.raises(TrainingError, match=rf"training stopped at step 10: .*{named}.*was not written"):
        train_task("teacher-student", steps=12, log_every=5, save_every=5, on_log=on_log, save=path)
    assert checkpoint.load(path)["step"] == 5
    monkeypatch.undo()
    _, _, history, _ = train_task(steps=12, resume=path, save=path, log_every=5)  # the one left resumes
    assert len(history.loss) == 12 and np.isfinite(history.loss).all()


def test_weights_changed_outside_the_steps_are_named(tmp_path):
    path = str(tmp_path / "run.npz")
    models = []

    def on_log(step, loss, history):
        if step == 10:
            models[0].W_query.data *= 2.0

    real_make = npattn.train.tasks.TeacherStudent.make_model

    def make_model(self):
        models.append(real_make(self))
        return models[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(npattn.train.tasks.TeacherStudent, "make_model", make_model)
        with pytest.raises(TrainingError, match=r"step 10: .*the model's weights, the optimizer's settings"):
            train_task("teacher-student", steps=12, log_every=5, save_every=5, on_log=on_log, save=path)
    assert checkpoint.load(path)["step"] == 5
