"""A resumed checkpoint's optimizer state and counters must be the ones its step count gives.

Edited checkpoints (an emptied optimizer state, one parameter at another step, counters the step
count cannot give) are refused before any step, naming the field, the expected and the actual
value; legitimately saved checkpoints at 0, 1, several steps and after an epoch boundary resume
to exactly the numbers of an uninterrupted run, for the attention task and the language model."""

import re

import numpy as np
import pytest
from training_bad_inputs import LM_TINY, edited_copy, swapped_chars

import npattn
from npattn.errors import CheckpointError, TrainingError
from npattn.optim import SGD, Adam
from npattn.train.command import train_task
from npattn.train.lm_run import run_lm
from npattn.train.loop import check_optimizer_steps
from npattn.train.text import default_corpus

# ---------------------------------------------------------------------------------------------
# the attention task (npattn train --task ...)


EMPTY_LOG = {"loss": np.zeros(0), "log_steps": np.zeros(0), "moved_from_start": {}, "moved_since_log": {}}


@pytest.fixture(scope="module")
def task_ck(tmp_path_factory):
    path = tmp_path_factory.mktemp("task") / "run.npz"
    train_task("teacher-student", optimizer="adamw", steps=3, save=path, log_every=1)
    return path


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda s: s["optimizer"].update(state={}), "parameter 0: 'step' is missing (no state: the moments"),
        (lambda s: s["optimizer"]["state"][1].update(step=99), "parameter 1: 'step' is 99; expected 3"),
        (lambda s: s["optimizer"]["state"].pop(2), "parameter 2: 'step' is missing"),
        (
            lambda s: s.update(step=0, history={**s["history"], **EMPTY_LOG}),
            "parameter 0: 'step' is 3; expected 0, the history's step count",
        ),
        (lambda s: s["history"].update(log_steps=np.array([1, 2, 7])), "log_steps holds step 7, past the 3 losses"),
        (lambda s: s["history"].update(log_steps=np.array([2, 1, 3])), "must be increasing step counts, got [2, 1, 3]"),
        (lambda s: s["history"].update(log_steps=np.array([1, 2.5, 3])), "must be a whole step count, got 2.5"),
        (lambda s: s["history"].update(start={}), "history.start must hold every parameter with its shape"),
        (
            lambda s: s["history"]["last_log"].update(W_query=np.zeros((7, 7))),
            "history.last_log must hold every parameter with its shape",
        ),
        (lambda s: s["history"].update(moved_from_start={}), "history.moved_from_start must hold 3 distances"),
        (
            lambda s: s["history"]["moved_since_log"].update(W_key=np.zeros(2)),
            "history.moved_since_log['W_key'] holds 2 distances for the 3 log steps in history.log_steps",
        ),
    ],
)
def test_task_resume_refuses_inconsistent_optimizer_state(tmp_path, task_ck, edit, message):
    edited = edited_copy(task_ck, tmp_path, edit)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        train_task(steps=5, resume=edited)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("at", [0, 1, 4])
def test_task_resume_at_every_step_count_equals_an_uninterrupted_run(tmp_path, optimizer, at):
    straight, _, history, _ = train_task("teacher-student", optimizer=optimizer, steps=6)
    ck = tmp_path / "run.npz"
    train_task("teacher-student", optimizer=optimizer, steps=at, save=ck)
    resumed, _, resumed_history, _ = train_task(steps=6, resume=ck)
    for name, value in straight.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value)
    np.testing.assert_array_equal(resumed_history.loss, history.loss)


def test_sgd_momentum_buffers_must_match_the_step_count():
    model = npattn.SelfAttention_v1(3, 2, rng=0, dtype=np.float64)
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    check_optimizer_steps(opt, 0, "ck.npz")
    with pytest.raises(CheckpointError, match=r"parameter 0 has no a 'momentum_buffer' after 2 steps \(expected one\)"):
        check_optimizer_steps(opt, 2, "ck.npz")
    for p in model.parameters():
        p.grad[...] = 1.0
    opt.step()
    check_optimizer_steps(opt, 1, "ck.npz")
    with pytest.raises(CheckpointError, match=r"has a 'momentum_buffer' after 0 steps \(expected none\)"):
        check_optimizer_steps(opt, 0, "ck.npz")
    adam = Adam(model.parameters())
    with pytest.raises(CheckpointError, match=r"'step' is missing .*expected 1"):
        check_optimizer_steps(adam, 1, "ck.npz")


# ---------------------------------------------------------------------------------------------
# the language-model run (npattn train --task lm): 22 steps per epoch on this text


@pytest.fixture(scope="module")
def lm_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("lmtext") / "t.txt"
    path.write_text(default_corpus()[:400], encoding="utf-8")
    return str(path)


def _lm(text, steps, **kwargs):
    return run_lm({**LM_TINY, "text": text, "steps": steps}, out=None, **kwargs)


@pytest.fixture(scope="module")
def lm_ck(tmp_path_factory, lm_text):
    path = tmp_path_factory.mktemp("lmck") / "run.npz"
    _lm(lm_text, 3, save=path)
    return path


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda s: s["optimizer"].update(state={}), "parameter 0: 'step' is missing (no state: the moments"),
        (lambda s: s["optimizer"]["state"][4].update(step=99), "parameter 4: 'step' is 99; expected 3"),
        (
            lambda s: s["history"].update(global_step=-1),
            "history.batch 3 place the run after 3 steps (22 per epoch); expected 0, the count history.global_step -1",
        ),
        (lambda s: s["history"].update(tokens_seen=5), "history.tokens_seen is 5; expected 48 (3 steps of 16 tokens)"),
        (lambda s: s["history"].update(epoch=2), "history.epoch 2 and history.batch 3 place the run after 47 steps"),
        (
            lambda s: s["history"].update(batch=0),
            "history.batch 0 place the run after 0 steps (22 per epoch); expected 3",
        ),
        (
            lambda s: s["history"].update(track_tokens_seen=np.array([0, 17, 48])),
            "history.track_tokens_seen[1] is 17; expected 16 (1 steps of 16 tokens)",
        ),
        (lambda s: s["history"].update(samples=[[9, "x"]]), "samples at step 9, after its global_step 2"),
        (lambda s: s.update(tokenizer=swapped_chars(s["tokenizer"])), "its tokenizer differs from the char tokenizer"),
        (
            lambda s: s["optimizer"]["param_groups"][0].update(weight_decay=0.0),
            "its optimizer's weight_decay 0.0 differs from the run's weight_decay 0.1 (the settings the run's options",
        ),
        (
            lambda s: s["optimizer"]["param_groups"][0].update(lr=0.5),
            "its optimizer's lr 0.5 differs from the run's lr 0.0004",
        ),
        (
            lambda s: s["history"].update(train_losses=[float("nan")] * 2),
            "history.train_losses[0] must be a finite number >= 0, got nan",
        ),
    ],
)
def test_lm_resume_refuses_inconsistent_state(tmp_path, lm_ck, lm_text, edit, message):
    edited = edited_copy(lm_ck, tmp_path, edit)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        run_lm({"text": lm_text, "steps": 5}, resume=edited, out=None)


@pytest.mark.parametrize("at", [0, 1, 5, 22, 23])
def test_lm_resume_at_every_step_count_equals_an_uninterrupted_run(tmp_path, lm_text, at):
    straight, _, history = _lm(lm_text, 25)
    ck = tmp_path / "run.npz"
    _lm(lm_text, at, save=ck)
    resumed, _, resumed_history = run_lm({"text": lm_text, "steps": 25}, resume=ck, out=None)
    for name, value in straight.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value)
    assert (resumed_history.global_step, resumed_history.epoch, resumed_history.batch) == (24, 1, 3)
    assert resumed_history.tokens_seen == history.tokens_seen == 25 * 16


# ---------------------------------------------------------------------------------------------
# every optimizer setting of a resumed checkpoint must be the one the run's options give


def _with_amsgrad(s):
    s["optimizer"]["param_groups"][0]["amsgrad"] = True
    for buffers in s["optimizer"]["state"].values():
        buffers["max_exp_avg_sq"] = buffers["exp_avg_sq"].copy()


def _group(**edit):
    return lambda s: s["optimizer"]["param_groups"][0].update(edit)


SETTING_EDITS = [
    (_group(betas=(0.5, 0.9)), "betas (0.5, 0.9) differs from the run's betas (0.9, 0.999)"),
    (_group(eps=1e-3), "eps 0.001 differs from the run's eps 1e-08"),
    (_group(weight_decay=0.5), "weight_decay 0.5 differs from the run's weight_decay"),
    (_group(maximize=True), "maximize True differs from the run's maximize False"),
    (_with_amsgrad, "amsgrad True differs from the run's amsgrad False"),
]


@pytest.mark.parametrize("edit,message", SETTING_EDITS)
def test_task_resume_refuses_an_edited_optimizer_setting(tmp_path, task_ck, edit, message):
    edited = edited_copy(task_ck, tmp_path, edit)
    with pytest.raises(CheckpointError, match=re.escape(message) + ".*cannot change on resume"):
        train_task(steps=5, resume=edited)


@pytest.mark.parametrize("edit,message", SETTING_EDITS)
def test_lm_resume_refuses_an_edited_optimizer_setting(tmp_path, lm_ck, lm_text, edit, message):
    edited = edited_copy(lm_ck, tmp_path, edit)
    with pytest.raises(CheckpointError, match=re.escape(message) + ".*cannot change on resume"):
        run_lm({"text": lm_text, "steps": 5}, resume=edited, out=None)


def test_sgd_momentum_setting_is_compared_on_resume(tmp_path):
    ck = tmp_path / "run.npz"
    train_task("teacher-student", optimizer="sgd", steps=2, save=ck)
    edited = edited_copy(ck, tmp_path, _group(dampening=0.5))
    with pytest.raises(CheckpointError, match=r"its optimizer's dampening 0.5 differs from the run's dampening 0.0"):
        train_task(steps=3, resume=edited)


# ---------------------------------------------------------------------------------------------
# the history's weights and distances must be the ones the run made


def _shift(entry, key="W_query", at=-1, by=0.25):
    def edit(s):
        s["history"][entry][key][at] += by

    return edit


@pytest.mark.parametrize(
    "edit,message",
    [
        (_shift("start", at=0), "history.start['W_query'] is not the initial weights the run's seed and task build"),
        (_shift("last_log", at=0), "history.last_log['W_query'] differs from the model's weights, logged at step 3"),
        (_shift("moved_from_start"), "history.moved_from_start['W_query'][-1] is"),
        (_shift("moved_from_start", at=0), "history.moved_since_log['W_query'][0] is"),
        (_shift("moved_since_log", at=0), "history.moved_since_log['W_query'][0] is"),
        (lambda s: s["history"].update(log_steps=np.array([1, 2, 2])), "history.log_steps must be increasing"),
    ],
)
def test_task_resume_refuses_an_edited_history(tmp_path, task_ck, edit, message):
    edited = edited_copy(task_ck, tmp_path, edit)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        train_task(steps=5, resume=edited)


def test_a_checkpoint_whose_weights_stopped_moving_after_a_log_resumes(tmp_path):
    """SGD at lr 500 saturates the softmax: the gradients become exactly 0 and the weights stop
    moving after the last log, then the loss overflows. The run's own last checkpoint (weights equal
    to the last log's, several steps later) must resume; it was refused as "edited"."""
    ck = tmp_path / "run.npz"
    stopped = pytest.raises(TrainingError, match=r"last checkpoint of this run, .* holds step")
    with np.errstate(all="ignore"), stopped as info:
        train_task("teacher-student", optimizer="sgd", lr=500.0, steps=300, save=ck, save_every=5, log_every=10)
    saved = int(npattn.load(ck)["step"])
    assert f"holds step {saved}" in str(info.value)
    with np.errstate(all="ignore"):
        _, _, history, _ = train_task(steps=saved, resume=ck)
    assert len(history.loss) == saved and history.log_steps[-1] < saved


def test_task_resume_accepts_checkpoints_between_logs(tmp_path):
    ck = tmp_path / "run.npz"
    train_task("teacher-student", steps=5, save=ck, save_every=1, log_every=2)  # the last save is at step 5
    for at in (0, 1, 3):
        train_task("teacher-student", steps=at, save=tmp_path / f"{at}.npz", log_every=2)
        train_task(steps=6, resume=tmp_path / f"{at}.npz")
