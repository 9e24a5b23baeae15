"""A setting given on resume is compared with the checkpoint's as the value a fresh run would use.

``lr=np.float32(0.05)`` trains a fresh run with 0.05000000074505806; NumPy compares it equal to a
checkpoint's 0.05 (in float32), so a resume used to accept it and silently keep 0.05. ``train_task``
(``npattn train``) and ``run_lm`` (``--task lm``) now share one exact check that names the value
given, the one a run would use and the checkpoint's. ``run_lm`` also takes a 0-d tensor or array
as its number, as the optimizers do.
"""

import re

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.resume import check_resumed_settings, fresh_value

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=3, sample_tokens=2, prompt="the", dtype="float64", lr=0.001)


def test_task_resume_refuses_a_float32_lr_that_a_fresh_run_would_use_otherwise(tmp_path):
    path = str(tmp_path / "c.npz")
    npattn.train_task("teacher-student", steps=2, save=path, lr=0.05)
    given = float(np.float32(0.05))
    message = f"--lr np.float32(0.05) (a run uses {given!r}) (checkpoint: 0.05)"
    with pytest.raises(ConfigError, match=re.escape(message)):
        npattn.train_task(steps=3, resume=path, lr=np.float32(0.05))
    _, opt, _, _ = npattn.train_task(steps=3, resume=path, lr=np.float64(0.05), seed=np.int64(123))
    assert opt.param_groups[0]["lr"] == 0.05


def test_lm_resume_refuses_a_float32_lr(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = str(tmp_path / "lm.npz")
    run_lm(dict(LM, text=str(text), steps=2), save=path, out=None)
    with pytest.raises(ConfigError, match=re.escape("--lr np.float32(0.001) (a run uses 0.0010000000474974513)")):
        run_lm(dict(LM, text=str(text), steps=3, lr=np.float32(0.001)), resume=path, out=None)


def test_lm_settings_take_a_zero_d_tensor_or_array_as_its_number():
    assert LMSettings(lr=np.array(0.001)).lr == 0.001
    torch = pytest.importorskip("torch")
    assert LMSettings(lr=torch.tensor(0.001, dtype=torch.float64)).lr == 0.001
    assert LMSettings(lr=torch.tensor(0.001)).lr == float(np.float32(0.001))


def test_the_shared_check_is_exact():
    check_resumed_settings({"lr": 1, "seed": np.int64(2**60 + 1)}, {"lr": 1.0, "seed": 2**60 + 1}, str)
    with pytest.raises(ConfigError, match=r"seed 1152921504606846977 \(checkpoint: 1152921504606846976\)"):
        check_resumed_settings({"seed": 2**60 + 1}, {"seed": 2**60}, str)
    with pytest.raises(ConfigError, match=r"--x True \(checkpoint: 1\)"):
        check_resumed_settings({"x": True}, {"x": 1}, lambda k: f"--{k}")
    assert fresh_value(np.float32(0.5)) == 0.5 and type(fresh_value(np.float32(0.5))) is float
