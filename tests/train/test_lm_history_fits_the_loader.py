"""``train_lm(history=...)`` standing inside an epoch, with a loader of another batch size or window
length, went on at another window than the run had reached (batch 20 of batch size 8 is window 160,
of batch size 4 window 80) and counted tokens no run makes; inside an epoch the tokens the history
counts must be the tokens the loader gives over its epochs and batches. The same loader goes on;
at an epoch's start any loader may."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import AdamW

TEXT = open("README.md", encoding="utf-8").read()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)
CFG = dict(vocab_size=TOK.vocab_size, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
VAL = npattn.create_dataloader_v1(TEXT[2000:2400], 2, 8, 8, shuffle=False, drop_last=False, tokenizer=TOK)


def loader(batch_size, max_length=8, drop_last=True):
    return npattn.create_dataloader_v1(TEXT[:2000], batch_size, max_length, max_length, tokenizer=TOK, seed=123,
                                       drop_last=drop_last)  # fmt: skip


def run(train_loader, max_steps, history=None):
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    opt = AdamW(model.parameters(), lr=0.01)
    return npattn.train_lm(model, train_loader, VAL, opt, 3, 7, 1, "The", TOK, out=None, sample_tokens=1,
                           max_steps=max_steps, history=history)  # fmt: skip


@pytest.mark.parametrize(("batch_size", "max_length"), [(8, 8), (4, 16), (2, 8), (4, 7)])
def test_a_loader_of_other_batches_is_refused(batch_size, max_length):
    history = run(loader(4), 20)
    tokens = history.tokens_seen
    message = rf"train_lm: the history stands at batch 20 inside epoch 0 with {tokens} tokens counted, but this"
    with pytest.raises(ConfigError, match=message):
        run(loader(batch_size, max_length), 30, history)
    assert history.tokens_seen == tokens and history.global_step == 19  # nothing ran


@pytest.mark.parametrize("drop_last", [True, False])
def test_the_same_loader_goes_on_across_epochs(drop_last):
    history = run(loader(4, drop_last=drop_last), len(loader(4, drop_last=drop_last)) + 5)
    history = run(loader(4, drop_last=drop_last), len(loader(4, drop_last=drop_last)) + 9, history)
    assert history.global_step + 1 == len(loader(4, drop_last=drop_last)) + 9


def test_at_an_epochs_start_another_loader_may_go_on():
    history = run(loader(4), len(loader(4)))  # one whole epoch
    assert history.batch == 0
    other = npattn.create_dataloader_v1(TEXT[1000:3000], 8, 8, 4, tokenizer=TOK, seed=5)  # another text and stride
    history = run(other, len(loader(4)) + 3, history)
    assert history.global_step + 1 == len(loader(4)) + 3


def test_a_loader_taken_at_an_epochs_start_goes_on_inside_its_epoch():
    first = loader(4)
    history = run(first, len(first))  # epoch 0 with batches of 4
    other = loader(8)  # epoch 1 with batches of 8
    history = run(other, len(first) + 3, history)
    assert (history.epoch, history.batch) == (1, 3)
    history = run(other, len(first) + 5, history)  # the same loader goes on inside epoch 1
    assert (history.epoch, history.batch) == (1, 5)
