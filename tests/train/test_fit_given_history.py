"""A history handed to fit, or read back from a checkpoint, must be a record the run could have made.

fit continues a history only when it is this model's record of start_step steps (one loss per step,
its parameters' shapes, its last logged weights the model's); History.from_state_dict checks every
entry's type and range; a resumed history's losses are never negative (npattn's losses are >= 0);
fit refuses a loss per element (reduction="none") up front."""

import re

import numpy as np
import pytest
from training_bad_inputs import edited_copy

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.nn.losses import MSELoss
from npattn.optim import Adam
from npattn.train.command import train_task
from npattn.train.loop import History
from npattn.train.tasks import SelectiveCopy, TeacherStudent


def _run(task, steps, **kw):
    model = task.make_model()
    opt = Adam(model.parameters(), lr=0.05)
    return model, opt, npattn.fit(model, opt, task.criterion, task.batch, steps, **kw)


def test_fit_refuses_a_history_of_another_step_count():
    task = SelectiveCopy(seed=5)
    model, opt, history = _run(task, 5)
    with pytest.raises(ConfigError, match=re.escape("fit (start_step=2): its history has 5 losses for 2 steps")):
        npattn.fit(model, opt, task.criterion, task.batch, 6, start_step=2, history=history)
    assert len(history.loss) == 5  # untouched


def test_fit_refuses_the_history_of_another_run_of_the_same_shapes():
    a, b = TeacherStudent(seed=1), TeacherStudent(seed=2)
    _, _, history_a = _run(a, 3, log_every=1)
    model_b, opt_b, _ = _run(b, 3)
    with pytest.raises(ConfigError, match=r"history.last_log\['W_query'\] differs from the model's weights, logged at"):
        npattn.fit(model_b, opt_b, b.criterion, b.batch, 5, start_step=3, history=history_a)


def test_fit_refuses_the_history_of_a_model_of_other_shapes():
    task = SelectiveCopy(seed=5)
    _, _, history = _run(task, 2)
    other = TeacherStudent(seed=1)
    model, opt, _ = _run(other, 2)
    with pytest.raises(ConfigError, match=r"history.start must hold every parameter with its shape \{'W_query': \("):
        npattn.fit(model, opt, other.criterion, other.batch, 4, start_step=2, history=history)


def test_fit_refuses_a_fresh_history_of_another_model_at_step_0():
    a, b = TeacherStudent(seed=1), TeacherStudent(seed=2)
    history = History.begin(a.make_model())
    model = b.make_model()
    opt = Adam(model.parameters(), lr=0.05)
    with pytest.raises(ConfigError, match=r"history.start\['W_query'\] differs from the model's weights at step 0"):
        npattn.fit(model, opt, b.criterion, b.batch, 2, history=history)


def test_fit_continues_its_own_history_exactly():
    task = SelectiveCopy(seed=5)
    _, _, straight = _run(task, 6, log_every=2)
    model, opt, history = _run(task, 4, log_every=2)
    npattn.fit(model, opt, task.criterion, task.batch, 6, start_step=4, history=history, log_every=2)
    assert history.loss == straight.loss and history.moved_since_log == straight.moved_since_log
    model = task.make_model()
    history = History.begin(model)
    npattn.fit(model, Adam(model.parameters(), lr=0.05), task.criterion, task.batch, 6, history=history, log_every=2)
    assert history.moved_from_start == straight.moved_from_start


def test_fit_refuses_a_loss_per_element():
    task = TeacherStudent(seed=1)
    model = task.make_model()
    opt = Adam(model.parameters(), lr=0.05)
    with pytest.raises(ConfigError, match=r"fit: the criterion must give a scalar loss \(reduction 'mean' or 'sum'\)"):
        npattn.fit(model, opt, MSELoss(reduction="none"), task.batch, 2)
    npattn.fit(model, opt, MSELoss(reduction="sum"), task.batch, 1)
    with pytest.raises(ConfigError, match=r"got reduction='none'"):
        npattn.fit(model, opt, MSELoss(reduction="none"), task.batch, 3, start_step=1, history=History.begin(model))


def _state(**changes):
    task = TeacherStudent(seed=1)
    _, _, history = _run(task, 3, log_every=1)
    state = history.state_dict()
    state.update(changes)
    return state


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"log_steps": np.array([4, 2])}, "history.log_steps must be increasing step counts, got [4, 2]"),
        ({"log_steps": np.array([0, 2])}, "history.log_steps[0] must be a whole step count >= 1, got 0"),
        ({"log_steps": ["a"]}, "history.log_steps[0] must be a whole step count, got 'a'"),
        ({"loss": "abc"}, "history.loss must be a list of numbers, got str"),
        ({"loss": [0.5, True]}, "history.loss[1] must be a number, got True"),
        ({"loss": np.array([0.5, np.inf])}, "history.loss[1] is inf; a run records finite values only"),
        ({"moved_from_start": {"W_query": [-1.0]}}, "history.moved_from_start['W_query'][0] must be a number >= 0"),
        ({"moved_since_log": []}, "history.moved_since_log must be a dict keyed by parameter name, got list"),
        ({"start": {"W_query": "x"}}, "history.start['W_query'] must be an array of real numbers, got str"),
        ({"last_log": {"W_query": np.array(["a"])}}, "history.last_log['W_query'] must be an array of real numbers"),
        ({"start": {"W_query": [[1.0, 2.0], [3.0]]}}, "history.start['W_query'] must be an array of real numbers"),
        ({"loss": [10**30, np.nan]}, "history.loss[1] is nan; a run records finite values only"),
        ({"extra": 1}, "the history must be a dict of the entries ['loss', 'log_steps', "),
    ],
)
def test_from_state_dict_names_the_bad_entry(changes, message):
    with pytest.raises(CheckpointError, match=re.escape(message)):
        History.from_state_dict(_state(**changes))


def test_from_state_dict_reads_back_what_state_dict_wrote(tmp_path):
    state = _state()
    npattn.save(state, tmp_path / "h.npz")
    again = History.from_state_dict(npattn.load(tmp_path / "h.npz"))
    assert again.loss == list(state["loss"]) and again.log_steps == [1, 2, 3]
    with pytest.raises(CheckpointError, match="the history must be a dict of the entries"):
        History.from_state_dict(None)


def test_resume_refuses_a_negative_loss(tmp_path):
    ck = tmp_path / "run.npz"
    train_task("teacher-student", steps=4, save=ck)

    def edit(s):
        s["history"]["loss"][3] = -1.0

    with pytest.raises(CheckpointError, match=re.escape("history.loss[3] is -1.0; a run's losses are >= 0")):
        train_task(steps=5, resume=edited_copy(ck, tmp_path, edit))
