"""``train_lm(out=...)`` is checked before anything runs, as ``run_lm`` checks it: a path given
for the stream is a ConfigError naming its type, with the model's weights unchanged."""

import io

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.nn.gpt import GPTModel
from npattn.optim import AdamW
from npattn.train.lm import train_lm
from npattn.train.text import create_dataloader_v1
from npattn.train.tokenizers import CharTokenizer

TEXT = "the cat sat on the mat. the dog sat on the log. " * 12


def _setup():
    tok = CharTokenizer.train(TEXT)
    train = create_dataloader_v1(TEXT[:300], batch_size=2, max_length=8, stride=8, tokenizer=tok, seed=1)
    val = create_dataloader_v1(TEXT[300:], batch_size=2, max_length=8, stride=8, shuffle=False, tokenizer=tok)
    cfg = {"vocab_size": tok.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip
    model = GPTModel(cfg, rng=1)
    return model, AdamW(model.parameters(), lr=0.01), train, val, tok


@pytest.mark.parametrize("out", ["x", 3, io.BytesIO(), io.StringIO])
def test_a_bad_out_is_refused_before_the_first_step(out) -> None:
    model, optimizer, train, val, tok = _setup()
    before = {k: p.data.copy() for k, p in model.named_parameters()}
    message = r"out must be a text stream \(with write\) or None, got (str|int|BytesIO|type)"
    with pytest.raises(ConfigError, match=message):
        train_lm(model, train, val, optimizer, 1, 1, 1, "the", tok, out=out, max_steps=2, sample_tokens=1)
    assert all(np.array_equal(p.data, before[k]) for k, p in model.named_parameters())
    assert not optimizer.state


def test_a_text_stream_or_none_is_taken() -> None:
    model, optimizer, train, val, tok = _setup()
    stream = io.StringIO()
    history = train_lm(model, train, val, optimizer, 1, 1, 1, "the", tok, out=stream, max_steps=1, sample_tokens=1)
    assert history.global_step == 0 and stream.getvalue().startswith("Ep 1")
    train_lm(model, train, val, optimizer, 1, 1, 1, "the", tok, out=None, max_steps=2, sample_tokens=1, history=history)
