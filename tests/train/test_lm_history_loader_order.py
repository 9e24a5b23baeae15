"""A history records the shuffle and seed of npattn's DataLoader it trained on; going on inside an
epoch with another seed or shuffle is refused (its batches would come in another order), while a
history without them (saved before they were recorded) still loads and continues."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.optim import AdamW
from npattn.train import LMHistory, split_train_val

TEXT = npattn.default_corpus()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)
TRAIN, VAL = split_train_val(TEXT, 0.9)


def loader(text, shuffle, seed=123):
    return npattn.create_dataloader_v1(
        text, batch_size=2, max_length=8, stride=8, shuffle=shuffle, drop_last=True, tokenizer=TOK, seed=seed
    )


def setup():
    cfg = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    model = npattn.GPTModel(cfg, rng=1)
    return model, AdamW(model.parameters(), lr=0.004)


def run(model, opt, train_loader, **kw):
    return npattn.train_lm(model, train_loader, loader(VAL, False), opt, num_epochs=1, eval_freq=2, eval_iter=1,
                           start_context="the", tokenizer=TOK, out=None, sample_tokens=2, **kw)


def test_the_loader_is_recorded_and_saved():
    model, opt = setup()
    history = run(model, opt, loader(TRAIN, True), max_steps=3)
    assert (history.loader_shuffle, history.loader_seed) == (True, 123)
    back = LMHistory.from_state_dict(history.state_dict())
    assert (back.loader_shuffle, back.loader_seed) == (True, 123)
    assert run(model, opt, list(loader(TRAIN, True).batches(0)), max_steps=1).loader_seed is None


@pytest.mark.parametrize(("shuffle", "seed"), [(True, 124), (False, 123)])
def test_another_order_inside_an_epoch_is_refused_and_nothing_changes(shuffle, seed):
    model, opt = setup()
    history = run(model, opt, loader(TRAIN, True), max_steps=5)
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ConfigError, match=rf"shuffle=True, seed=123, but this train_loader has shuffle={shuffle}, "
                                          rf"seed={seed}"):
        run(model, opt, loader(TRAIN, shuffle, seed), max_steps=10, history=history)
    assert all(np.array_equal(a, p.data) for a, p in zip(before, model.parameters()))
    assert (history.global_step, history.loader_seed) == (4, 123)


def test_a_history_saved_without_the_loader_still_continues():
    model, opt = setup()
    sd = run(model, opt, loader(TRAIN, True), max_steps=5).state_dict()
    del sd["loader_shuffle"], sd["loader_seed"]
    old = LMHistory.from_state_dict(sd)
    assert (old.loader_shuffle, old.loader_seed) == (None, None)
    assert run(model, opt, loader(TRAIN, True), max_steps=7, history=old).global_step == 6


@pytest.mark.parametrize(("key", "value"), [("loader_shuffle", 1), ("loader_seed", -1), ("loader_seed", 1.5)])
def test_bad_recorded_values_are_refused(key, value):
    sd = LMHistory().state_dict()
    sd[key] = value
    with pytest.raises(CheckpointError, match=rf"history.{key}"):
        LMHistory.from_state_dict(sd)
