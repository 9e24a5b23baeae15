"""A history also records which windows its npattn DataLoader is made of (SHA-256 of the dataset's
input and target windows): going on inside an epoch with a loader of another stride, window length
or text of the same length was accepted, and trained on windows the run never reached in that order.
It is refused, nothing changed; at an epoch's start any loader may go on, and a history saved
before the windows were recorded still continues."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.optim import AdamW
from npattn.train import LMHistory, split_train_val

TEXT = npattn.default_corpus()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)
TRAIN, VAL = split_train_val(TEXT, 0.9)


def loader(text=TRAIN, stride=8):
    return npattn.create_dataloader_v1(
        text, batch_size=2, max_length=8, stride=stride, shuffle=True, drop_last=True, tokenizer=TOK, seed=1
    )


def setup():
    cfg = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    model = npattn.GPTModel(cfg, rng=1)
    return model, AdamW(model.parameters(), lr=0.004)


def run(model, opt, train_loader, **kw):
    val = npattn.create_dataloader_v1(VAL, batch_size=2, max_length=8, stride=8, shuffle=False, tokenizer=TOK)
    return npattn.train_lm(model, train_loader, val, opt, num_epochs=3, eval_freq=2, eval_iter=1,
                           start_context="the", tokenizer=TOK, out=None, sample_tokens=2, **kw)


def edited(text):
    """The same length, two different neighbouring characters swapped."""
    i = next(i for i in range(100, len(text)) if text[i] != text[i + 1])
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


@pytest.mark.parametrize("other", [lambda: loader(stride=7), lambda: loader(edited(TRAIN))], ids=["stride", "text"])
def test_other_windows_inside_an_epoch_are_refused_and_nothing_changes(other):
    model, opt = setup()
    history = run(model, opt, loader(), max_steps=4)
    assert history.batch != 0 and len(history.loader_windows) == 64
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ConfigError, match="of a loader over other windows than this train_loader's"):
        run(model, opt, other(), max_steps=8, history=history)
    assert all(np.array_equal(a, p.data) for a, p in zip(before, model.parameters()))


def test_the_same_windows_continue_and_the_digest_is_saved():
    model, opt = setup()
    history = run(model, opt, loader(), max_steps=4)
    back = LMHistory.from_state_dict(history.state_dict())
    assert back.loader_windows == history.loader_windows
    run(model, opt, loader(), max_steps=6, history=back)


def test_a_history_without_the_digest_still_continues():
    model, opt = setup()
    sd = run(model, opt, loader(), max_steps=4).state_dict()
    del sd["loader_windows"]
    run(model, opt, loader(stride=7), max_steps=6, history=LMHistory.from_state_dict(sd))


@pytest.mark.parametrize("bad", ["abc", 5, "G" * 64])
def test_a_bad_digest_is_refused(bad):
    model, opt = setup()
    sd = run(model, opt, loader(), max_steps=1).state_dict()
    sd["loader_windows"] = bad
    with pytest.raises(CheckpointError, match=r"history\.loader_windows must be a SHA-256 in hex or None"):
        LMHistory.from_state_dict(sd)
