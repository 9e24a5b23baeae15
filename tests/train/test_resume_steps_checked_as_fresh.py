"""A bad ``steps`` given on resume is the caller's mistake: the fresh run's ConfigError, never a
CheckpointError blaming the file (``'r.npz' holds a bad run setting``)."""

import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.train.lm_run import run_lm

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=3, sample_tokens=2, prompt="the", dtype="float64", lr=0.001, drop_rate=0.0)
BAD_STEPS = [(-1, "got -1"), (16.0, r"got 16.0 \(float\)"), ("5", r"got '5' \(str\)"), (True, r"got True \(bool\)")]


@pytest.fixture(scope="module")
def task_ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("task") / "r.npz")
    npattn.train_task("teacher-student", steps=3, save=path, log_every=0)
    return path


@pytest.mark.parametrize(("steps", "got"), BAD_STEPS)
def test_task_resume_bad_steps(task_ckpt, steps, got):
    with pytest.raises(ConfigError, match=f"^steps must be an integer >= 0, {got}$") as info:
        npattn.train_task(steps=steps, resume=task_ckpt)
    assert type(info.value) is ConfigError and "r.npz" not in str(info.value)


def test_task_resume_bad_arguments_before_the_checkpoint(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_text("not a checkpoint")
    with pytest.raises(ConfigError, match=r"^steps must be"):
        npattn.train_task(steps=-1, resume=str(broken))
    with pytest.raises(ConfigError, match="unknown optimizer 'Adam'"):
        npattn.train_task(optimizer="Adam", resume=str(broken))
    with pytest.raises(CheckpointError, match=r"broken\.npz"):
        npattn.train_task(steps=3, resume=str(broken))


def test_task_resume_good_steps_still_compared(task_ckpt):
    with pytest.raises(ConfigError, match="below the checkpoint's step count 3"):
        npattn.train_task(steps=2, resume=task_ckpt)
    npattn.train_task(steps=3, resume=task_ckpt)


def test_lm_resume_bad_steps(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = str(tmp_path / "lm.npz")
    run_lm(dict(LM, text=str(text), steps=2), save=path, out=None)
    for steps, got in BAD_STEPS:
        with pytest.raises(ConfigError, match=rf"^steps \(--steps\) must be an integer >= 0, {got}$") as info:
            run_lm({"steps": steps}, resume=path, out=None)
        assert type(info.value) is ConfigError and "lm.npz" not in str(info.value)
    with pytest.raises(ConfigError, match=r"epochs \(--epochs\) must be a positive integer"):
        run_lm({"epochs": 0}, resume=path, out=None)
