"""A Python int too large for a float (10**400) where a number is expected is a ConfigError naming
its size (float() raised OverflowError), and a run's float settings are stored as Python floats, so
a resumed run compares them exactly (np.float32(0.0004) is not 0.0004)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, Adam
from npattn.train.lm_run import run_lm

CFG = {"vocab_size": 5, "context_length": 4, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
       "qkv_bias": False}  # fmt: skip


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: SGD([p], lr=2**1024), r"learning rate: expected a finite number >= 0, got an integer of about 309"),
        (lambda p: Adam([p], betas=(10**400, 0.9)), r"beta parameter at index 0: an integer of about 401 digits"),
        (lambda p: Adam([p], eps=10**5000), r"epsilon value: expected a finite number >= 0, got an integer of about"),
        (lambda p: npattn.GPTModel({**CFG, "drop_rate": 10**400}), r"must lie in \[0, 1\), got an integer of about"),
        (
            lambda p: npattn.generate(npattn.GPTModel(CFG), np.array([[1]]), 1, 4, temperature=10**400),
            r"temperature must be a finite number, got an integer of about 401 digits",
        ),
    ],
)
def test_huge_ints_are_config_errors(call, message):
    with pytest.raises(ConfigError, match=message):
        call(npattn.Parameter(np.ones(2)))


def test_a_resumed_lm_run_compares_its_lr_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    settings = {"text": "t.txt", "tokenizer": "char", "context_length": 8, "emb_dim": 8, "n_heads": 2,
                "n_layers": 1, "batch_size": 2, "steps": 2, "eval_every": 2, "eval_iter": 1,
                "sample_tokens": 2}  # fmt: skip
    run_lm({**settings, "lr": np.float32(0.0004)}, save="r.npz", out=None)
    assert type(npattn.load("r.npz")["run"]["settings"]["lr"]) is float
    with pytest.raises(ConfigError, match=r"--lr 0.0004 \(checkpoint: 0.00039999998989515007\)"):
        run_lm({**settings, "steps": 3, "lr": 0.0004}, resume="r.npz", out=None)
