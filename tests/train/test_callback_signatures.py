"""Each callback's signature is checked against the arguments it is called with, before any step.

``fit(..., on_log=lambda: None)`` used to raise Python's TypeError ("takes 0 positional arguments
but 3 were given") after the steps had already changed the weights. check_callback (shared by fit,
train_task, train_lm and so run_lm) now binds the arguments up front and raises ConfigError naming
the callback and how it is called; a builtin without a signature passes.
"""

import re

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.nn.gpt import GPTModel
from npattn.optim import Adam, AdamW
from npattn.train.lm import train_lm
from npattn.train.loop import check_callback
from npattn.train.tasks import TeacherStudent
from npattn.train.text import create_dataloader_v1
from npattn.train.tokenizers import CharTokenizer


@pytest.mark.parametrize(
    ("name", "callback", "message"),
    [
        ("on_log", lambda: None, "on_log is called as on_log(step, loss, history) (3 positional arguments), "
         "but <lambda>() does not accept that: too many positional arguments"),
        ("on_step", lambda step, history, extra: None, "on_step is called as on_step(step, history) "
         "(2 positional arguments), but <lambda>(step, history, extra) does not accept that: "
         "missing a required argument: 'extra'"),
    ],
)
def test_fit_refuses_a_callback_of_another_signature_before_any_step(name, callback, message):
    task = TeacherStudent(seed=1)
    model = task.make_model()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    opt = Adam(model.parameters(), lr=0.05)
    with pytest.raises(ConfigError, match=re.escape(message)):
        npattn.fit(model, opt, task.criterion, task.batch, 3, log_every=1, **{name: callback})
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_train_task_checks_on_log_and_on_start(tmp_path):
    with pytest.raises(ConfigError, match=re.escape("on_start is called as on_start() (no arguments)")):
        npattn.train_task("teacher-student", steps=2, on_start=lambda header: None)
    with pytest.raises(ConfigError, match=r"on_log is called as on_log\(step, loss, history\)"):
        npattn.train_task("teacher-student", steps=2, on_log=lambda step: None, save=str(tmp_path / "c.npz"))
    assert not (tmp_path / "c.npz").exists()


def test_train_lm_checks_on_step():
    text = "the quick brown fox jumps over the lazy dog. " * 10
    tok = CharTokenizer.train(text)
    train = create_dataloader_v1(text[:300], batch_size=2, max_length=8, stride=8, tokenizer=tok, seed=1)
    val = create_dataloader_v1(text[300:], batch_size=2, max_length=8, stride=8, shuffle=False, tokenizer=tok)
    config = dict(vocab_size=tok.vocab_size, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0,
                  qkv_bias=False)
    model = GPTModel(config)
    with pytest.raises(ConfigError, match=re.escape("on_step is called as on_step(history) (1 positional argument)")):
        train_lm(model, train, val, AdamW(model.parameters()), 1, 2, 1, "the", tok, out=None, on_step=lambda: None)


def test_flexible_callbacks_and_builtins_pass():
    for callback in (print, lambda *a: None, lambda step, loss, history=None, *, extra=0: None, np.add):
        check_callback(callback, "on_log", "step, loss, history")
    check_callback(lambda: None, "on_start", "")
