"""A resumed attention-task run goes on with its own log_every (the checkpoint stores it), so a
killed run resumed without repeating ``--log-every`` ends with the uninterrupted run's history
(it logged every 30 steps, the command's default, and its history differed without a word)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.train import command

ENV = {**os.environ, "PYTHONPATH": str(Path(npattn.__file__).resolve().parent.parent)}


def _history(path):
    return npattn.load(str(path))["history"]


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a if k != "seconds")
    return np.array_equal(np.asarray(a), np.asarray(b))


def _stopped_at(step, path, **kwargs):  # the checkpoint holds step - 1: the save follows the log
    def on_log(at, loss, history):
        if at == step:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        npattn.train_task("teacher-student", steps=40, save=str(path), save_every=1, on_log=on_log, **kwargs)


def test_train_task_resumed_without_log_every_logs_as_the_run_did(tmp_path):
    npattn.train_task("teacher-student", steps=40, log_every=7, save=str(tmp_path / "a.npz"))
    _stopped_at(14, tmp_path / "b.npz", log_every=7)
    npattn.train_task(resume=str(tmp_path / "b.npz"), save=str(tmp_path / "b.npz"), steps=40)
    assert [int(s) for s in _history(tmp_path / "b.npz")["log_steps"]] == [7, 14, 21, 28, 35, 40]
    assert _same(_history(tmp_path / "a.npz"), _history(tmp_path / "b.npz"))
    assert npattn.load(str(tmp_path / "b.npz"))["run"]["log_every"] == 7


def test_a_log_every_given_on_resume_is_used_and_stored(tmp_path):
    _stopped_at(14, tmp_path / "b.npz", log_every=7)
    npattn.train_task(resume=str(tmp_path / "b.npz"), save=str(tmp_path / "b.npz"), steps=40, log_every=10)
    assert [int(s) for s in _history(tmp_path / "b.npz")["log_steps"]] == [7, 20, 30, 40]
    assert npattn.load(str(tmp_path / "b.npz"))["run"]["log_every"] == 10


def test_the_command_resumed_without_log_every_logs_as_the_run_did(tmp_path):
    run = [sys.executable, "-m", "npattn", "train", "--task", "teacher-student", "--steps", "40"]
    subprocess.run([*run, "--log-every", "7", "--save", "a.npz"], cwd=tmp_path, env=ENV, check=True,
                   capture_output=True)
    _stopped_at(14, tmp_path / "b.npz", log_every=7)
    done = subprocess.run([*run[:4], "--resume", "b.npz", "--save", "b.npz", "--steps", "40"], cwd=tmp_path,
                          env=ENV, check=True, capture_output=True, text=True)  # fmt: skip
    logged = [line.split()[0] for line in done.stdout.splitlines()[2:8]]
    assert logged == ["14", "21", "28", "35", "40", "held-out:"]
    assert _same(_history(tmp_path / "a.npz"), _history(tmp_path / "b.npz"))


def _older(tmp_path):
    """A checkpoint as npattn wrote it before log_every was stored (stopped after step 13, logs at 7)."""
    _stopped_at(14, tmp_path / "b.npz", log_every=7)
    saved = npattn.load(str(tmp_path / "b.npz"))
    del saved["run"]["log_every"]
    del saved["digest"]
    npattn.save(npattn.train.digest.stamped(saved), str(tmp_path / "old.npz"))
    assert command.ADDED_RUN_KEYS == ("log_every",)
    return str(tmp_path / "old.npz")


def test_a_checkpoint_written_before_log_every_was_stored_resumes_with_train_tasks_default(tmp_path):
    old = _older(tmp_path)
    npattn.train_task(resume=old, save=old, steps=40)
    assert [int(s) for s in _history(old)["log_steps"]] == [7, 40]


def test_the_command_resumes_such_a_checkpoint_with_its_default_of_30(tmp_path):
    old = _older(tmp_path)
    done = subprocess.run([sys.executable, "-m", "npattn", "train", "--resume", old, "--save", old, "--steps", "40"],
                          cwd=tmp_path, env=ENV, check=True, capture_output=True, text=True)  # fmt: skip
    assert [line.split()[0] for line in done.stdout.splitlines()[2:4]] == ["30", "40"]
    assert [int(s) for s in _history(old)["log_steps"]] == [7, 30, 40]
    assert npattn.load(old)["run"]["log_every"] == 30
