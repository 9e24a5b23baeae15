"""train_lm and fit refuse, before the first step and with every weight unchanged, a tokenizer of
more ids than the model's vocabulary and a weight that is NaN or inf; a batch with an id outside the
vocabulary is refused before its forward, naming the step."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, AdamW
from npattn.train import split_train_val

TEXT = npattn.default_corpus()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)


def loader(text, shuffle, tok=TOK, seed=123):
    return npattn.create_dataloader_v1(
        text, batch_size=2, max_length=8, stride=8, shuffle=shuffle, drop_last=shuffle, tokenizer=tok, seed=seed
    )


def gpt(vocab, rng=1):
    cfg = {"vocab_size": vocab, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    return npattn.GPTModel(cfg, rng=rng)


def run(model, train_loader, **kw):
    va = split_train_val(TEXT, 0.9)[1]
    return npattn.train_lm(
        model, train_loader, loader(va, False), AdamW(model.parameters(), lr=0.004), num_epochs=1, eval_freq=4,
        eval_iter=1, start_context="the", tokenizer=TOK, out=None, **kw
    )


def weights(model):
    return [p.data.copy() for p in model.parameters()]


def unchanged(model, before):
    return all(np.array_equal(a, p.data, equal_nan=True) for a, p in zip(before, model.parameters()))


def test_a_tokenizer_larger_than_the_model_is_refused_before_the_first_step():
    model = gpt(TOK.vocab_size - 5)
    before = weights(model)
    with pytest.raises(ConfigError, match=rf"vocab_size {TOK.vocab_size}.*tok_emb has {TOK.vocab_size - 5} rows"):
        run(model, loader(split_train_val(TEXT, 0.9)[0], True))
    assert unchanged(model, before)


def test_an_id_outside_the_vocabulary_mid_run_names_the_step_and_changes_nothing_then():
    model = gpt(TOK.vocab_size)
    good = list(loader(split_train_val(TEXT, 0.9)[0], True).batches(0))[:3]
    x, y = good[2]
    x = x.copy()
    x[0, 0] = TOK.vocab_size  # a loader over another tokenizer's ids
    seen = []
    with pytest.raises(ConfigError, match=rf"step 2's input batch holds token id {TOK.vocab_size}.*"
                                          r"weights were not changed by step 2"):
        run(model, [*good[:2], (x, y)], on_step=lambda h: seen.append(weights(model)))
    assert len(seen) == 2 and unchanged(model, seen[-1])


def test_a_nan_weight_is_refused_before_step_0_by_train_lm():
    model = gpt(TOK.vocab_size, rng=123)
    model.tok_emb.weight.data[0, 0] = np.nan
    before = weights(model)
    with pytest.raises(ConfigError, match=r"train_lm: 1 entry of tok_emb.weight .* NaN or inf before the first step"):
        run(model, loader(split_train_val(TEXT, 0.9)[0], True), max_steps=3)
    assert unchanged(model, before)


def test_a_nan_weight_is_refused_before_step_0_by_fit():
    layer = npattn.Linear(3, 2, rng=0)
    layer.weight.data[1, :] = np.inf
    before = weights(layer)
    x, t = np.ones((4, 3)), np.zeros((4, 2))
    with pytest.raises(ConfigError, match=r"fit: 3 entries of weight .* NaN or inf before the first step"):
        npattn.fit(layer, SGD(layer.parameters(), lr=0.1), npattn.MSELoss(), lambda step: (x, t), 2)
    assert unchanged(layer, before)
