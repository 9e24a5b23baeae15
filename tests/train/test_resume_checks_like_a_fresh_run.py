"""A setting given on resume is first checked as a fresh run checks it (the fresh run's message),
then compared with the checkpoint: ``seed=123.0`` or ``emb_dim=8.0`` (refused by a fresh run) used
to pass as equal to the checkpoint's ints, and ``seed='123'`` was reported as a difference."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.train.lm_run import run_lm

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=3, sample_tokens=2, prompt="the", dtype="float64", lr=0.001, drop_rate=0.0)


@pytest.fixture(scope="module")
def task_ckpt(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("task") / "c.npz")
    npattn.train_task("teacher-student", steps=2, save=path)
    return path


@pytest.fixture(scope="module")
def lm_ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm")
    text = folder / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = str(folder / "lm.npz")
    run_lm(dict(LM, text=str(text), steps=2), save=path, out=None)
    return path


@pytest.mark.parametrize(
    "given, message",
    [
        ({"seed": 123.0}, r"seed must be an integer in \[0, 2\*\*32\), got 123.0"),
        ({"seed": np.float64(123.0)}, r"seed must be an integer in \[0, 2\*\*32\), got np.float64\(123.0\)"),
        ({"seed": 123.5}, r"seed must be an integer in \[0, 2\*\*32\), got 123.5"),
        ({"seed": "123"}, r"seed must be an integer in \[0, 2\*\*32\), got '123'"),
        ({"lr": -1.0}, r"Invalid learning rate: -1"),
    ],
)
def test_task_resume(task_ckpt, given, message):
    with pytest.raises(ConfigError, match=message) as info:
        npattn.train_task(steps=3, resume=task_ckpt, **given)
    assert "differ" not in str(info.value)


@pytest.mark.parametrize(
    "given, message",
    [
        ({"seed": 123.0}, r"seed \(--seed\) must be an integer in \[0, 2\*\*32\), got 123.0"),
        ({"emb_dim": 8.0}, r"emb_dim \(--emb-dim\) must be a positive integer"),
        ({"batch_size": True}, r"batch_size \(--batch-size\) must be a positive integer"),
        ({"drop_rate": "0.1"}, r"drop_rate \(--drop-rate\)"),
        ({"seed": "123"}, r"seed \(--seed\) must be an integer"),
    ],
)
def test_lm_resume(lm_ckpt, given, message):
    with pytest.raises(ConfigError, match=message) as info:
        run_lm({"steps": 3, **given}, resume=lm_ckpt, out=None)
    assert "differ" not in str(info.value)


def test_valid_values_still_compared(task_ckpt, lm_ckpt):
    with pytest.raises(ConfigError, match=r"differ from it: --seed 7 \(checkpoint: 123\)"):
        npattn.train_task(steps=3, resume=task_ckpt, seed=7)
    npattn.train_task(steps=3, resume=task_ckpt, seed=np.int64(123))
    with pytest.raises(ConfigError, match=r"differ from it: --emb-dim 16 \(checkpoint: 8\)"):
        run_lm({"steps": 3, "emb_dim": 16}, resume=lm_ckpt, out=None)
