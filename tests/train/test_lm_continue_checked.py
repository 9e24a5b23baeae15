"""train_lm(history=...) is checked before anything runs, with run_lm's words: max_steps or
num_epochs below what the history already did (it returned having done nothing), and a history
whose batch lies past the epoch of the loader it continues with (a bare StopIteration)."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.optim import AdamW

TEXT = open("README.md", encoding="utf-8").read()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)
CFG = dict(vocab_size=TOK.vocab_size, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)


def loader(batch_size):
    return npattn.create_dataloader_v1(TEXT[:2500], batch_size=batch_size, max_length=8, stride=8, tokenizer=TOK)


VAL = npattn.create_dataloader_v1(TEXT[2500:], 2, 8, 8, shuffle=False, drop_last=False, tokenizer=TOK)


def run(model, train, num_epochs, max_steps, history=None):
    opt = AdamW(model.parameters(), lr=0.01)
    return npattn.train_lm(model, train, VAL, opt, num_epochs, 50, 1, "The", TOK, max_steps=max_steps, out=None,
                           sample_tokens=2, history=history)


def weights(model):
    return [p.data.copy() for p in model.parameters()]


def test_max_steps_below_the_history_is_refused_before_anything_runs():
    model = npattn.GPTModel(CFG, rng=3)
    history = run(model, loader(2), 1, 10)
    before, evals = weights(model), list(history.eval_steps)
    with pytest.raises(ConfigError, match=r"train_lm: max_steps=5 is below the history's step count 10 \(the total"):
        run(model, loader(2), 1, 5, history)
    assert all(np.array_equal(a, b) for a, b in zip(before, weights(model))) and history.eval_steps == evals
    run(model, loader(2), 1, 10, history)  # the total it already has: nothing left, no refusal
    assert history.global_step == 9


def test_num_epochs_below_the_history_is_refused():
    model = npattn.GPTModel(CFG, rng=3)
    history = run(model, loader(8), 2, None)
    assert history.epoch == 2
    with pytest.raises(ConfigError, match=r"train_lm: num_epochs=1 is below the history's epoch count 2"):
        run(model, loader(8), 1, None, history)


def test_a_history_past_the_epoch_of_the_new_loader_is_refused_before_anything_runs():
    model = npattn.GPTModel(CFG, rng=3)
    history = run(model, loader(2), 1, 100)  # 156 batches per epoch, the history at batch 100
    assert (len(loader(2)), len(loader(4)), history.batch) == (156, 78, 100)
    before = weights(model)
    with pytest.raises(CheckpointError, match=r"history.batch 100 is beyond the 78 batches of an epoch"):
        run(model, loader(4), 2, 110, history)
    assert all(np.array_equal(a, b) for a, b in zip(before, weights(model))) and history.global_step == 99
