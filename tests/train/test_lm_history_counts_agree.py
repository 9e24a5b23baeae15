"""A continued history's global_step must agree with its epoch and batch (train_lm), and a history
read back refuses evaluation steps, token counts or sample steps that go backwards."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.optim import AdamW
from npattn.train import LMHistory, split_train_val

TEXT = npattn.default_corpus()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)
TRAIN, VAL = split_train_val(TEXT, 0.9)


def loader(text, shuffle):
    return npattn.create_dataloader_v1(
        text, batch_size=2, max_length=8, stride=8, shuffle=shuffle, drop_last=shuffle, tokenizer=TOK, seed=123
    )


def setup():
    cfg = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    model = npattn.GPTModel(cfg, rng=1)
    return model, AdamW(model.parameters(), lr=0.004)


def run(model, opt, num_epochs=1, **kw):
    return npattn.train_lm(model, loader(TRAIN, True), loader(VAL, False), opt, num_epochs=num_epochs, eval_freq=2,
                           eval_iter=1, start_context="the", tokenizer=TOK, out=None, sample_tokens=2, **kw)


def test_a_global_step_that_contradicts_epoch_and_batch_is_refused_before_a_step():
    model, opt = setup()
    sd = run(model, opt, max_steps=5).state_dict()
    sd["global_step"] = 2  # epoch 0, batch 5: five steps were taken
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ConfigError, match=r"history.epoch 0 and history.batch 5 place the run after 5 steps.*"
                                          r"expected 3, the count history.global_step 2 gives"):
        run(model, opt, max_steps=8, history=LMHistory.from_state_dict(sd))
    assert all(np.array_equal(a, p.data) for a, p in zip(before, model.parameters()))


def test_at_an_epoch_start_the_count_covers_the_epochs_done():
    model, opt = setup()
    with pytest.raises(ConfigError, match=r"after no step \(epoch 0, batch 0\); history.global_step 3 counts 4"):
        run(model, opt, history=LMHistory(global_step=3))
    with pytest.raises(ConfigError, match=r"after at least 2 steps; history.global_step 0 counts 1"):
        run(model, opt, num_epochs=3, history=LMHistory(global_step=0, epoch=2))


def test_a_consistent_continuation_still_runs():
    model, opt = setup()
    history = run(model, opt, max_steps=3)
    history = run(model, opt, max_steps=5, history=LMHistory.from_state_dict(history.state_dict()))
    assert (history.global_step, history.batch) == (4, 5)


@pytest.mark.parametrize("key", ["eval_steps", "track_tokens_seen"])
def test_a_reversed_record_is_refused_naming_the_entry(key):
    model, opt = setup()
    sd = run(model, opt, max_steps=5).state_dict()
    sd[key] = sd[key][::-1].copy()
    with pytest.raises(CheckpointError, match=rf"history.{key} must not decrease"):
        LMHistory.from_state_dict(sd)


def test_samples_out_of_order_are_refused():
    sd = LMHistory(global_step=9, epoch=1, samples=[(9, "a"), (4, "b")]).state_dict()
    with pytest.raises(CheckpointError, match=r"history.samples' steps must not decrease .*, got 9 then 4 at index 1"):
        LMHistory.from_state_dict(sd)


def test_a_negative_loss_is_refused():
    state = LMHistory().state_dict()
    state["val_losses"] = np.array([-1.0])
    state["train_losses"], state["track_tokens_seen"], state["eval_steps"] = np.array([2.0]), [8], [0]
    state["global_step"], state["batch"], state["tokens_seen"] = 0, 1, 8
    with pytest.raises(CheckpointError, match=r"history\.val_losses\[0\] must be a finite number >= 0, got -1\.0"):
        LMHistory.from_state_dict(state)
