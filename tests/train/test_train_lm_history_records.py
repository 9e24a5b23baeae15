"""A history given to ``train_lm`` that records evaluations or samples after its own global_step,
or an evaluation at that step with other tokens than the history has seen, is refused before the
first step, as ``--resume`` refuses it (it was continued: an evaluation "at step 12" sat before
step 12's real one, carrying step 9's tokens)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import AdamW
from npattn.train.text import split_train_val

TEXT = npattn.default_corpus()[:4000]
TOK = npattn.CharTokenizer.train(TEXT)
CFG = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip


def _run(max_steps, history=None, model=None, opt=None):
    train, val = split_train_val(TEXT, 0.9)
    loaders = (npattn.create_dataloader_v1(train, batch_size=2, max_length=8, stride=8, tokenizer=TOK, seed=123),
               npattn.create_dataloader_v1(val, batch_size=2, max_length=8, stride=8, shuffle=False, drop_last=False,
                                           tokenizer=TOK))  # fmt: skip
    if model is None:
        model = npattn.GPTModel(CFG, rng=123)
        opt = AdamW(model.parameters(), lr=0.01)
    history = npattn.train_lm(model, *loaders, opt, num_epochs=2, eval_freq=4, eval_iter=2, start_context="The",
                              tokenizer=TOK, max_steps=max_steps, out=None, history=history)  # fmt: skip
    return model, opt, history


EDITS = {
    "an evaluation after global_step": (lambda sd: sd["eval_steps"].__setitem__(-1, 12),
                                        r"records evaluations or samples at step 12, after its global_step 9"),
    "a sample after global_step": (lambda sd: sd.__setitem__("samples", [[40, "x"]]),
                                   r"records evaluations or samples at step 40, after its global_step 9"),
    "the last evaluation's tokens": (lambda sd: sd["track_tokens_seen"].__setitem__(-1, 150),
                                     r"track_tokens_seen\[3\] is 150, but its evaluation .* counts tokens_seen 160"),
}  # fmt: skip


@pytest.mark.parametrize("edit", EDITS)
def test_train_lm_refuses_a_history_recording_past_its_step(edit):
    model, opt, history = _run(10)
    assert history.global_step == 9 and history.eval_steps[-1] == 9
    state = history.state_dict()
    EDITS[edit][0](state)
    edited = npattn.LMHistory.from_state_dict(state)
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ConfigError, match=EDITS[edit][1]) as info:
        _run(20, edited, model, opt)
    assert str(info.value).startswith("train_lm: ")
    assert all(np.array_equal(p.data, b) for p, b in zip(model.parameters(), before))


def test_the_history_it_made_goes_on():
    model, opt, history = _run(10)
    _, _, history = _run(20, history, model, opt)
    assert history.global_step == 19 and history.eval_steps[-1] == 19
