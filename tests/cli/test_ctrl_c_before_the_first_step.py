"""A Ctrl-C that lands before a training run's first step (while the checkpoint it resumes is read,
the task and model are built) says that no checkpoint was written (it said "interrupted" alone); one
inside the loop keeps its own message, naming the step and what the checkpoint holds."""

import numpy as np
import pytest

import npattn
from npattn.train import command
from npattn.train.loop import Interrupted


def test_an_interrupt_during_set_up_says_no_checkpoint_was_written(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "make_task", interrupted)
    path = str(tmp_path / "run.npz")
    with pytest.raises(Interrupted, match="interrupted before the first step: no checkpoint was written"):
        npattn.train_task(steps=2, save=path)  # an Interrupted, as the docs say, as the loop's


def test_an_interrupt_in_the_loop_keeps_its_own_message(tmp_path):
    path = str(tmp_path / "run.npz")

    def on_log(step, loss, history):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        npattn.train_task(steps=4, save=path, save_every=1, log_every=1, on_log=on_log)
    assert "no checkpoint was written" not in str(info.value) and "step" in str(info.value)
    assert npattn.load(path)["step"] >= 1 and np.isfinite(npattn.load(path)["step"])


def test_an_interrupt_right_after_the_loop_does_not_say_nothing_was_written(tmp_path, monkeypatch):
    from contextlib import contextmanager

    from npattn.train.runsave import RunProgress

    original = RunProgress.interrupts

    @contextmanager
    def then_interrupted(self):
        with original(self):
            yield
        raise KeyboardInterrupt  # a bare press just after the loop's block closed

    monkeypatch.setattr(RunProgress, "interrupts", then_interrupted)
    path = str(tmp_path / "run.npz")
    with pytest.raises(KeyboardInterrupt) as info:
        npattn.train_task(steps=2, save=path)
    assert "no checkpoint was written" not in str(info.value)
    assert npattn.load(path)["step"] == 2


def test_an_interrupt_during_an_lm_runs_set_up_says_no_checkpoint_was_written(tmp_path, monkeypatch):
    from npattn.train import lm_run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lm_run, "train_tokenizer", interrupted)
    settings = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, steps=2)
    with pytest.raises(Interrupted, match="interrupted before the first step: no checkpoint was written"):
        npattn.run_lm(settings, save=str(tmp_path / "lm.npz"), out=None)
    assert not (tmp_path / "lm.npz").exists()
