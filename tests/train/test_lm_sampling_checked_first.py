"""train_lm checks its sample's settings (and eval_before) before the first step, against the
model's vocabulary where one needs it (eos_id) and whether or not a setting is used (rng while
greedy): a refusal after training would have changed the weights and the optimizer in a call that
raised."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import AdamW
from npattn.train.generate import generate
from npattn.train.text import create_dataloader_v1, default_corpus
from npattn.train.tokenizers import CharTokenizer

TEXT = default_corpus()[:3000]
TOK = CharTokenizer(sorted(set(TEXT)))
CFG = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip


@pytest.mark.parametrize(
    "given, message",
    [
        ({"temperature": -1.0}, r"temperature must be >= 0"),
        ({"top_k": 0}, r"top_k must be a positive integer, got 0"),
        ({"top_k": 10**6}, r"train_lm: top_k must lie in \[1, vocab="),
        ({"topk": 3}, r"unknown sampling keyword\(s\) \['topk'\]"),
        ({"start_context": ""}, r"start_context '' gives no token to continue"),
        ({"eval_before": "no"}, r"eval_before must be True or False, got 'no'"),
        ({"eos_id": 10**6}, rf"train_lm: eos_id must lie in \[0, vocab={TOK.vocab_size}\) .* got 1000000"),
        ({"eos_id": TOK.vocab_size}, rf"eos_id must lie in \[0, vocab={TOK.vocab_size}\)"),
        ({"rng": "x"}, r"rng must be None, an int seed, .* got str"),
        ({"rng": "x", "temperature": 0.0}, r"rng must be None, an int seed, .* got str"),  # checked though unused
    ],
)
def test_refused_before_any_step(given, message):
    train = create_dataloader_v1(TEXT[:2500], batch_size=2, max_length=8, stride=8, tokenizer=TOK)
    val = create_dataloader_v1(TEXT[2500:], batch_size=2, max_length=8, stride=8, tokenizer=TOK, shuffle=False)
    model = npattn.GPTModel(CFG, rng=1)
    opt = AdamW(model.parameters(), lr=1e-3)
    before = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    args = {"num_epochs": 1, "eval_freq": 3, "eval_iter": 1, "start_context": "The", "tokenizer": TOK,
            "max_steps": 2, "out": None, **given}  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        npattn.train_lm(model, train, val, opt, **args)
    assert all(np.array_equal(v, model.state_dict()[k]) for k, v in before.items())
    assert opt.state_dict()["state"] == {}


def test_generate_checks_rng_when_greedy_and_eos_id_without_tokens():
    model = npattn.GPTModel(CFG, rng=1)
    with pytest.raises(ConfigError, match=r"rng must be None"):
        generate(model, [[1, 2]], 3, 8, temperature=0.0, rng="x")
    with pytest.raises(ConfigError, match=rf"eos_id must lie in \[0, vocab={TOK.vocab_size}\)"):
        npattn.train_lm(model, [], [], AdamW(model.parameters()), 1, 1, 1, "The", TOK, eos_id=10**6, out=None)
