"""Training: the tasks are learned (fixed seeds), the history is right, L-BFGS converges on the
hand-derived gradients (and stalls on broken ones), non-finite losses stop training cleanly, and
a saved, killed and resumed run equals an uninterrupted one bit for bit."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from planted import plant
from training_bad_inputs import edited_copy

import npattn
from npattn.optim import SGD, Adam
from npattn.train.command import train_task
from npattn.train.lbfgs import fit_lbfgs
from npattn.train.loop import History, fit
from npattn.train.tasks import SelectiveCopy, TeacherStudent, attention_weights, make_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_teacher_student_loss_falls_1000x_in_the_default_settings():
    model, _, history, task = train_task("teacher-student")
    assert len(history.loss) == 300
    assert history.loss[0] / history.loss[-1] >= 1000
    assert task.evaluate(model)["loss"] <= history.loss[0] / 1000  # held-out data, not just the batches


def test_selective_copy_is_learned_and_attention_concentrates_on_the_marked_token():
    task = SelectiveCopy(seed=123)
    untrained = task.evaluate(task.make_model())
    model, _, _, _ = train_task("selective-copy")
    trained = task.evaluate(model)
    assert untrained["accuracy"] < 0.5 and untrained["attention_on_marked"] < 0.5
    assert trained["accuracy"] >= 0.99
    assert trained["attention_on_marked"] >= 0.95


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_selective_copy_learned_from_other_seeds(seed):
    model, _, _, task = train_task("selective-copy", seed=seed)
    scores = task.evaluate(model)
    assert scores["accuracy"] >= 0.99 and scores["attention_on_marked"] >= 0.99


def test_seed_0_finds_another_perfect_solution():
    """Accuracy alone does not prove the attention story. From seed 0 the model reaches 100%
    with a different solution: it attends to the marked token unless that token is of class 2;
    W_key gives class-2 keys a strongly negative score, so then attention spreads over the
    other tokens, and W_value writes a high class-2 logit into every non-class-2 value."""
    model, _, _, task = train_task("selective-copy", seed=0)
    x, target, marked = task.sample_with_marks(np.random.default_rng(0), 400)
    on_marked = attention_weights(model, x)[np.arange(400), :, marked].mean(axis=1)
    marked_class = target[:, 0]
    assert task.evaluate(model)["accuracy"] == 1.0
    assert on_marked[marked_class != 2].min() > 0.99
    assert on_marked[marked_class == 2].max() < 0.01


def test_selective_copy_data():
    task = SelectiveCopy(seed=5, n_classes=3, n_tokens=4, batch_size=8)
    x, target, marked = task.sample_with_marks(np.random.default_rng(0), 8)
    assert x.shape == (8, 4, 5) and target.shape == (8, 4)
    np.testing.assert_array_equal(x[:, :, :3].sum(-1), 1)  # one class per token
    np.testing.assert_array_equal(x[:, :, 3].sum(-1), 1)  # one marked token per sequence
    np.testing.assert_array_equal(x[:, :, 4], 1)  # the constant feature
    np.testing.assert_array_equal(target[:, 0], np.argmax(x[np.arange(8), marked, :3], -1))
    np.testing.assert_array_equal(task.batch(3)[0], task.batch(3)[0])  # a batch is a function of (seed, step)
    assert not np.array_equal(task.batch(3)[0], task.batch(4)[0])


def test_teacher_differs_from_student_and_tasks_are_named():
    task = make_task("teacher-student", seed=7)
    assert isinstance(task, TeacherStudent)
    assert not np.array_equal(task.teacher.W_query.data, task.make_model().W_query.data)
    with pytest.raises(npattn.ConfigError, match="unknown task 'copy'"):
        make_task("copy")
    with pytest.raises(npattn.ConfigError, match="seed"):
        make_task("selective-copy", seed=-1)


def test_history_records_loss_and_movement():
    task = TeacherStudent(seed=1)
    model = task.make_model()
    start = {n: p.data.copy() for n, p in model.named_parameters()}
    logged = []
    history = fit(
        model,
        SGD(model.parameters(), lr=0.1),
        task.criterion,
        task.batch,
        25,
        log_every=10,
        on_log=lambda step, loss, h: logged.append((step, loss)),
    )
    assert len(history.loss) == 25 and history.log_steps == [10, 20, 25]
    assert [s for s, _ in logged] == [10, 20, 25] and logged[-1][1] == history.loss[-1]
    for name, p in model.named_parameters():
        assert history.moved_from_start[name][-1] == pytest.approx(np.linalg.norm(p.data - start[name]))
        assert history.moved_since_log[name][0] == history.moved_from_start[name][0]
        assert all(m > 0 for m in history.moved_since_log[name])
    # the loss recorded at each step is the loss of that step's batch before its update
    again = task.make_model()
    x, target = task.batch(0)
    assert history.loss[0] == task.criterion(again(x), target)


def test_fit_lbfgs_reaches_machine_precision_on_teacher_student():
    task = TeacherStudent(seed=123)
    model = task.make_model()
    x, target = task.batch(0, size=256)
    history, result = fit_lbfgs(model, task.criterion, x, target)
    assert history.loss[0] / history.loss[-1] > 1e10
    assert result.fun < 1e-12 and history.loss[-1] == pytest.approx(result.fun)
    assert task.criterion(model(x), target) == pytest.approx(result.fun)  # the model holds the result
    assert task.evaluate(model)["loss"] < 1e-10
    assert history.log_steps == list(range(1, len(history.loss)))


def test_fit_lbfgs_learns_selective_copy():
    task = SelectiveCopy(seed=123)
    model = task.make_model()
    fit_lbfgs(model, task.criterion, *task.batch(0, size=256))
    scores = task.evaluate(model)
    assert scores["accuracy"] == 1.0 and scores["attention_on_marked"] > 0.99


def transposed_scores_backward(d_attn_scores, cache):
    queries, keys = cache
    return d_attn_scores @ keys, d_attn_scores @ queries  # bug: dK must use d_attn_scores^T


def test_fit_lbfgs_stalls_on_a_wrong_gradient(monkeypatch):
    """L-BFGS needs a true gradient: with a planted backward bug it stops far from the optimum."""
    plant(monkeypatch, "scores_backward", transposed_scores_backward)
    task = TeacherStudent(seed=123)
    model = task.make_model()
    history, result = fit_lbfgs(model, task.criterion, *task.batch(0, size=256))
    assert not result.success  # the line search fails: "ABNORMAL"
    assert history.loss[-1] > 1e-3  # the correct gradient reaches about 3e-15 from the same start


# ----------------------------------------------------------------------------------------------
# Non-finite losses


def nan_at(task, bad_step):
    def batch(step):
        x, target = task.batch(step)
        if step == bad_step:
            x = x.copy()
            x[0, 0, 0] = np.nan
        return x, target

    return batch


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_non_finite_loss_stops_training_with_weights_intact():
    task = TeacherStudent(seed=1)
    model = task.make_model()
    snapshots = {}
    with pytest.raises(npattn.TrainingError, match=r"training stopped at step 7: the loss is nan"):
        fit(
            model,
            Adam(model.parameters(), lr=0.05),
            task.criterion,
            nan_at(task, 7),
            20,
            on_step=lambda step, h: snapshots.update({step: model.state_dict()}),
        )
    for name, value in snapshots[7].items():
        np.testing.assert_array_equal(getattr(model, name).data, value)
        assert np.all(np.isfinite(value))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_non_finite_gradient_is_caught_too():
    model = npattn.SelfAttention_v1(2, 2, rng=0, dtype=np.float64)

    class InfGradLoss(npattn.MSELoss):
        def backward(self, grad_output=1.0):
            g = super().backward(grad_output)
            g[0, 0] = np.inf
            return g

    x = np.ones((3, 2))
    before = model.state_dict()
    with pytest.raises(npattn.TrainingError, match=r"step 0: the gradient of W_query has \d+ non-finite entries"):
        fit(model, SGD(model.parameters(), lr=0.1), InfGradLoss(), lambda s: (x, np.zeros((3, 2))), 5)
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(model, name).data, value)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_non_finite_loss_leaves_the_last_checkpoint_intact(tmp_path, monkeypatch):
    ck = tmp_path / "run.npz"
    real_batch = TeacherStudent.batch

    def batch(self, step, size=None):
        x, target = real_batch(self, step, size)
        if step == 13:
            x = np.full_like(x, np.inf)
        return x, target

    monkeypatch.setattr(TeacherStudent, "batch", batch)
    with pytest.raises(npattn.TrainingError, match="step 13"):
        train_task("teacher-student", steps=30, save=ck, save_every=5)
    saved = npattn.load(ck)
    assert saved["step"] == 10
    reference, _, _, _ = train_task("teacher-student", steps=10)
    for name, value in saved["model"].items():
        np.testing.assert_array_equal(value, getattr(reference, name).data)


# ----------------------------------------------------------------------------------------------
# Save, kill, resume


class Killed(BaseException):
    pass


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
@pytest.mark.parametrize("task", ["selective-copy", "teacher-student"])
def test_save_kill_resume_equals_uninterrupted(tmp_path, optimizer, task):
    steps, lr = 40, 0.02
    straight_model, straight_opt, straight_hist, _ = train_task(
        task, optimizer=optimizer, lr=lr, steps=steps, log_every=5
    )

    ck = tmp_path / "run.npz"

    def kill_at_25(step, loss, history):
        if step == 25:  # the checkpoint of step 20 exists; steps 21-25 are lost with the process
            raise Killed

    with pytest.raises(Killed):
        train_task(
            task, optimizer=optimizer, lr=lr, steps=steps, save=ck, save_every=10, log_every=5, on_log=kill_at_25
        )
    assert npattn.load(ck)["step"] == 20
    model, opt, history, _ = train_task(resume=ck, steps=steps, save=ck, log_every=5)

    for name, p in straight_model.named_parameters():
        np.testing.assert_array_equal(getattr(model, name).data, p.data)
    assert history.loss == straight_hist.loss
    assert history.log_steps == straight_hist.log_steps
    assert history.moved_from_start == straight_hist.moved_from_start
    assert history.moved_since_log == straight_hist.moved_since_log
    a, b = opt.state_dict(), straight_opt.state_dict()
    assert a["param_groups"] == b["param_groups"]
    for i in b["state"]:
        for key, value in b["state"][i].items():
            np.testing.assert_array_equal(a["state"][i][key], value)
    assert npattn.load(ck)["step"] == steps


def test_resume_refuses_fewer_steps_and_non_training_checkpoints(tmp_path):
    ck = tmp_path / "run.npz"
    train_task("teacher-student", steps=10, save=ck)
    with pytest.raises(npattn.ConfigError, match="below the checkpoint's step count 10"):
        train_task(resume=ck, steps=5)
    npattn.save(npattn.SelfAttention_v1(3, 2, rng=0), tmp_path / "model.npz")
    with pytest.raises(npattn.CheckpointError, match="not a training checkpoint"):
        train_task(resume=tmp_path / "model.npz", steps=5)
    with pytest.raises(npattn.ConfigError, match="unknown optimizer 'rmsprop'"):
        train_task(optimizer="rmsprop")
    with pytest.raises(npattn.ConfigError, match=r"a training checkpoint is an \.npz file"):
        train_task(save=tmp_path / "run.safetensors")


def test_cli_killed_by_a_signal_then_resumed_matches_an_uninterrupted_run(tmp_path):
    """A real process, killed with SIGKILL while training and saving every 25 steps."""
    ck = tmp_path / "run.npz"
    cmd = [sys.executable, "-m", "npattn", "train", "--task", "teacher-student", "--lr", "0.02", "--log-every", "0"]
    proc = subprocess.Popen([*cmd, "--steps", "1000000", "--save", str(ck), "--save-every", "25"], cwd=ROOT)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.05)
            if ck.exists() and npattn.load(ck)["step"] >= 100:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    saved_step = npattn.load(ck)["step"]  # the last complete checkpoint, whole despite the kill
    assert saved_step >= 100 and saved_step % 25 == 0
    total = saved_step + 30
    subprocess.run([*cmd[:4], "--steps", str(total), "--resume", str(ck), "--save", str(ck)], cwd=ROOT, check=True)
    model, _, history, _ = train_task("teacher-student", lr=0.02, steps=total)
    resumed = npattn.load(ck)
    assert resumed["step"] == total
    for name, value in resumed["model"].items():
        np.testing.assert_array_equal(value, getattr(model, name).data)
    np.testing.assert_array_equal(resumed["history"]["loss"], history.loss)


def test_attention_weights_helper():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    w = attention_weights(model, npattn.book_inputs())
    assert w.shape == (6, 6)
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-6)
    assert model._recorder is None


def test_attention_weights_helper_keeps_an_installed_recorder():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    names: list[str] = []
    recorder = lambda name, arr: names.append(name)  # noqa: E731
    model._recorder = recorder
    attention_weights(model, npattn.book_inputs())
    assert model._recorder is recorder
    assert "attn_weights" in names and "context_vec" in names


def test_history_state_round_trip(tmp_path):
    task = TeacherStudent(seed=3)
    model = task.make_model()
    history = fit(model, Adam(model.parameters(), lr=0.01), task.criterion, task.batch, 12, log_every=4)
    npattn.save(history.state_dict(), tmp_path / "h.npz")
    again = History.from_state_dict(npattn.load(tmp_path / "h.npz"))
    assert again.loss == history.loss and again.moved_from_start == history.moved_from_start
    for name in history.start:
        np.testing.assert_array_equal(again.start[name], history.start[name])


# ----------------------------------------------------------------------------------------------
# Everything checked before the first step; the error tells the truth about the checkpoint.


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_error_names_the_checkpoint_this_run_wrote(tmp_path, monkeypatch):
    real_batch = TeacherStudent.batch

    def batch(self, step, size=None):
        x, target = real_batch(self, step, size)
        return (np.full_like(x, np.inf) if step == 7 else x), target

    monkeypatch.setattr(TeacherStudent, "batch", batch)
    ck = tmp_path / "run.npz"
    with pytest.raises(npattn.TrainingError, match=r"The last checkpoint of this run, '.*run.npz', holds step 5\."):
        train_task("teacher-student", steps=20, save=ck, save_every=5)
    other = tmp_path / "other.npz"
    train_task("teacher-student", steps=2, save=other, seed=7)  # another run's checkpoint: it may be replaced
    before = other.read_bytes()
    with pytest.raises(npattn.TrainingError, match=r"This run wrote no checkpoint: '.*other.npz' is as it was"):
        train_task("teacher-student", steps=20, save=other)
    assert other.read_bytes() == before
    with pytest.raises(npattn.TrainingError) as info:
        train_task("teacher-student", steps=20)
    assert "checkpoint" not in str(info.value)


def test_non_finite_weights_are_never_saved(tmp_path, monkeypatch):
    """An update that overflows (finite loss and gradients, infinite weights) stops before the save."""

    class Overflowing(SGD):
        def step(self):
            super().step()
            self.param_groups[0]["params"][1].data[0, 0] = np.inf

    monkeypatch.setitem(npattn.train.command.OPTIMIZERS, "sgd", Overflowing)
    ck = tmp_path / "run.npz"
    with pytest.raises(npattn.TrainingError, match="its update made 1 entry of W_key non-finite"):
        train_task("teacher-student", optimizer="sgd", steps=3, save=ck, save_every=1)
    assert not ck.exists()


def test_zero_steps_still_writes_the_checkpoint_and_it_resumes(tmp_path):
    ck = tmp_path / "start.npz"
    train_task("teacher-student", steps=0, save=ck)
    assert npattn.load(ck)["step"] == 0
    resumed, _, _, _ = train_task(steps=4, resume=ck)
    direct, _, _, _ = train_task("teacher-student", steps=4)
    np.testing.assert_array_equal(resumed.W_key.data, direct.W_key.data)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"steps": -1}, npattn.ConfigError, "steps must be an integer >= 0, got -1"),
        ({"steps": 1.5}, npattn.ConfigError, "steps must be an integer >= 0, got 1.5"),
        ({"seed": -1}, npattn.ConfigError, "seed must be an integer in [0, 2**32), got -1"),
        ({"seed": None}, npattn.ConfigError, "seed must be an integer in [0, 2**32), got None"),
        ({"lr": "0.1"}, npattn.ConfigError, "Invalid learning rate"),
        ({"lr": float("nan")}, npattn.ConfigError, "Invalid learning rate"),
        ({"log_every": -1}, npattn.ConfigError, "log_every must be an integer >= 0"),
        ({"save_every": "3"}, npattn.ConfigError, "save_every must be an integer >= 0"),
        ({"save_every": 3}, npattn.ConfigError, "needs a save path"),
        ({"task": 5}, npattn.ConfigError, "unknown task 5"),
        ({"optimizer": "lbfgs"}, npattn.ConfigError, "unknown optimizer 'lbfgs'"),
        ({"on_log": "x"}, npattn.ConfigError, "on_log must be a function on_log(step, loss, history) or None, got str"),
        ({"on_start": 1}, npattn.ConfigError, "on_start must be a function on_start() or None, got int"),
        ({"save": "run.safetensors"}, npattn.ConfigError, "a training checkpoint is an .npz file"),
        ({"save": "noext"}, npattn.ConfigError, "--save: a training checkpoint is an .npz file (it holds the"),
        ({"save": "missing/run.npz"}, npattn.CheckpointError, "does not exist"),
    ],
)
def test_train_task_checks_its_arguments_first(tmp_path, monkeypatch, kwargs, error, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=re.escape(message)):
        train_task(**{"task": "teacher-student", "steps": 2, **kwargs})


def _edited_run(tmp_path, edit):
    ck = tmp_path / "run.npz"
    if not ck.exists():
        train_task("teacher-student", steps=2, save=ck)
    return edited_copy(ck, tmp_path, edit)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda s: s.update(extra=1), "not a checkpoint npattn train wrote"),
        (lambda s: s["run"].update(lr=-1.0), "Invalid learning rate: -1.0"),
        (lambda s: s["run"].update(seed="x"), "bad run setting: seed must be an integer in [0, 2**32), got 'x'"),
        (lambda s: s.update(step=-2), "the checkpoint's step must be an integer >= 0"),
        (lambda s: s["optimizer"]["param_groups"][0].update(lr=0.3), "differs from the run's lr 0.05"),
        (lambda s: s["optimizer"]["param_groups"][0].update(amsgrad="no"), "amsgrad must be True or False"),
        (lambda s: s["optimizer"]["state"][0].update(step=-3), "'step' must be an integer >= 1"),
        (lambda s: s.update(history=None), "the history must be a dict of the entries ['loss', "),
        (lambda s: s["history"].update(loss=np.zeros(5)), "its history has 5 losses for 2 steps"),
        (lambda s: s["history"]["loss"].__setitem__(1, np.nan), "history.loss[1] is nan; a run records finite"),
        (
            lambda s: s["history"]["moved_from_start"]["W_key"].__setitem__(0, np.inf),
            "history.moved_from_start['W_key'][0] is inf",
        ),
        (
            lambda s: s["optimizer"]["state"][0]["exp_avg_sq"].fill(-1.0),
            "edited.npz': state of parameter 0: 'exp_avg_sq' holds negative values",
        ),
    ],
)
def test_resume_checks_the_whole_checkpoint_first(tmp_path, edit, message):
    path = _edited_run(tmp_path, edit)
    with pytest.raises(npattn.NpattnError, match=re.escape(message)):
        train_task(steps=4, resume=path)


def test_progress_line_keeps_its_columns_apart_at_large_distances():
    from npattn.train.loop import History, progress_line

    history = History()
    history.start = {"W_query": None, "W_key": None, "W_value": None}
    history.moved_from_start = {"W_query": [882248176.2044887], "W_key": [7212618.49], "W_value": [4.5]}
    line = progress_line(30, 1e6, history)
    assert line.split()[-3:] == ["8.82e+08", "7.21e+06", "4.500"]
    history.moved_from_start = {"W_query": [1.0], "W_key": [2.0], "W_value": [3.0]}
    assert len(line) == len(progress_line(30, 1e6, history))  # the columns keep their width


@pytest.mark.parametrize(
    "given,shown",
    [
        ({"optimizer": "sgd"}, "--optimizer 'sgd' (checkpoint: 'adam')"),
        ({"task": "selective-copy"}, "--task 'selective-copy' (checkpoint: 'teacher-student')"),
        ({"seed": 7}, "--seed 7 (checkpoint: 123)"),
        ({"lr": 0.3, "seed": 7}, "--lr 0.3 (checkpoint: 0.05), --seed 7 (checkpoint: 123)"),
    ],
)
def test_resume_refuses_settings_that_contradict_the_checkpoint(tmp_path, given, shown):
    path = _edited_run(tmp_path, lambda s: None)
    with pytest.raises(npattn.ConfigError, match=re.escape(f"these options differ from it: {shown}")):
        train_task(steps=4, resume=path, **given)
    _, opt, history, task = train_task("teacher-student", optimizer="adam", lr=0.05, seed=123, steps=4, resume=path)
    assert type(opt) is Adam and len(history.loss) == 4 and task.seed == 123  # the same settings: accepted


def test_fit_refuses_a_start_past_the_end_and_bad_callbacks():
    task = make_task("teacher-student")
    model = task.make_model()
    opt = Adam(model.parameters())
    with pytest.raises(npattn.ConfigError, match=r"fit: start_step=10 is past steps=5"):
        fit(model, opt, task.criterion, task.batch, 5, start_step=10)
    history = fit(model, opt, task.criterion, task.batch, 5)
    again = fit(model, opt, task.criterion, task.batch, 5, start_step=5, history=history)  # nothing left to do
    assert again is history and len(history.loss) == 5
    with pytest.raises(npattn.ConfigError, match=r"fit: start_step=2 needs history=, the History of the run's first"):
        fit(model, opt, task.criterion, task.batch, 5, start_step=2)  # its record would miss two losses
    with pytest.raises(npattn.ConfigError, match=r"on_step must be a function on_step\(step, history\)"):
        fit(model, opt, task.criterion, task.batch, 5, on_step=3)
    with pytest.raises(npattn.ConfigError, match="criterion must be a loss with forward and backward"):
        fit(model, opt, "mse", task.batch, 5)
    with pytest.raises(npattn.ConfigError, match="fit_lbfgs: criterion must be a loss"):
        fit_lbfgs(model, len, np.zeros((2, 4, 4)), np.zeros((2, 4, 4)))
