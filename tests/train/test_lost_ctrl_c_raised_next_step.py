"""A Ctrl-C whose KeyboardInterrupt Python lost (raised inside a ctypes callback or a __del__,
where exceptions are dropped) used to leave the run training with further presses ignored: the
command line's handler also records the press (npattn._interrupts), and fit and train_lm raise it
at their next step."""

import numpy as np
import pytest

import npattn
from npattn import _interrupts
from npattn.optim import SGD, AdamW


@pytest.fixture
def lost_press(monkeypatch):
    """An on_step that records a press as the handler does, its exception lost."""
    monkeypatch.setattr(_interrupts, "pressed", False)
    steps = []

    def on_step(*args):
        steps.append(args)
        if len(steps) == 2:
            _interrupts.press()  # the handler's flag; the KeyboardInterrupt it raised never arrived

    return on_step, steps


def test_fit_raises_a_lost_ctrl_c_at_its_next_step(lost_press) -> None:
    on_step, steps = lost_press
    task = npattn.tasks.TeacherStudent()
    model = task.make_model()
    with pytest.raises(KeyboardInterrupt):
        npattn.fit(model, SGD(model.parameters(), lr=0.05), task.criterion, task.batch, 50, on_step=on_step)
    assert len(steps) == 2  # the step after the press never ran


def test_train_lm_raises_a_lost_ctrl_c_at_its_next_step(lost_press) -> None:
    on_step, steps = lost_press
    text = open("README.md", encoding="utf-8").read()[:2000]
    tok = npattn.CharTokenizer.train(text)
    cfg = dict(vocab_size=tok.vocab_size, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0,
               qkv_bias=False)  # fmt: skip
    model = npattn.GPTModel(cfg, rng=3)
    train = npattn.create_dataloader_v1(text[:400], 4, 8, 8, shuffle=False, tokenizer=tok)
    val = npattn.create_dataloader_v1(text[400:600], 2, 8, 8, shuffle=False, drop_last=False, tokenizer=tok)
    with pytest.raises(KeyboardInterrupt):
        npattn.train_lm(model, train, val, AdamW(model.parameters()), 2, 5, 1, "The", tok, out=None,
                        on_step=on_step)  # fmt: skip
    assert len(steps) == 2


def test_without_a_press_nothing_is_raised(monkeypatch) -> None:
    monkeypatch.setattr(_interrupts, "pressed", False)
    task = npattn.tasks.TeacherStudent()
    model = task.make_model()
    history = npattn.fit(model, SGD(model.parameters(), lr=0.05), task.criterion, task.batch, 3)
    assert np.isfinite(history.loss).all()
