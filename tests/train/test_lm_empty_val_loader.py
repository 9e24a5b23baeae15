"""train_lm refuses an empty validation loader, as it refuses an empty training loader.

A val_loader of length 0 (a validation text shorter than one batch with drop_last) used to train
and record val_losses [nan, nan, ...]; calc_loss_loader still returns nan for an empty loader, as
in the book. A loader without a length (a generator) is not checked, as before.
"""

import re

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.nn.module import Module, Parameter
from npattn.optim import AdamW
from npattn.train.lm import calc_loss_loader, train_lm
from npattn.train.text import DataLoader, GPTDatasetV1, create_dataloader_v1
from npattn.train.tokenizers import CharTokenizer

TEXT = "the cat sat on the mat. the dog sat on the log. " * 12


class _Positions:
    def __init__(self, context_length: int) -> None:
        self.weight = np.zeros((context_length, 1))


class Table(Module):
    """Logits of a position = the row of its token (enough for the loop)."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.table = Parameter(np.random.default_rng(0).normal(0, 0.1, (vocab_size, vocab_size)))
        self.pos_emb = _Positions(16)

    def forward(self, idx):
        self.idx = np.asarray(idx)
        return self.table.data[self.idx]

    def backward(self, dlogits):
        np.add.at(self.table.grad, self.idx, dlogits)


def _setup():
    tok = CharTokenizer.train(TEXT)
    train = create_dataloader_v1(TEXT, 4, 8, 8, shuffle=False, drop_last=True, tokenizer=tok)
    model = Table(tok.vocab_size)
    return tok, train, model, AdamW(model.parameters())


def test_an_empty_val_loader_is_refused_before_any_step():
    tok, train, model, opt = _setup()
    empty = DataLoader(GPTDatasetV1(None, None, 8, 8, token_ids=range(20)), 4, drop_last=True)
    assert np.isnan(calc_loss_loader(empty, model))  # the book's answer for an empty loader stays
    before = model.table.data.copy()
    message = "the validation data (val_loader) gives no batch: 2 windows of 8 tokens for batches of 4"
    with pytest.raises(ConfigError, match=re.escape(message)):
        train_lm(model, train, empty, opt, 1, 1, 1, "the ", tok, out=None)
    with pytest.raises(ConfigError, match=re.escape("(val_loader) gives no batch (a loader of length 0)")):
        train_lm(model, train, [], opt, 1, 1, 1, "the ", tok, out=None)
    np.testing.assert_array_equal(model.table.data, before)
    assert opt.state == {}


def test_a_val_loader_with_batches_still_trains():
    tok, train, model, opt = _setup()
    val = create_dataloader_v1(TEXT[:100], 2, 8, 8, shuffle=False, drop_last=False, tokenizer=tok)
    history = train_lm(model, train, val, opt, 1, 2, 1, "the ", tok, out=None, sample_tokens=0)
    assert history.val_losses and all(np.isfinite(history.val_losses))
