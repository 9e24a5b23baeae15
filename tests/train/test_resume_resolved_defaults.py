"""A resume may name the value a run used for a setting it left at its default: stride (the
context length) and the BPE's vocab_size (1024) used to be compared with the checkpoint's None,
so ``--stride 8`` was refused "(checkpoint: None)"; another value is refused naming both."""

import re

import pytest

from npattn.errors import ConfigError
from npattn.train.lm_run import run_lm

LM = dict(context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=3, sample_tokens=2, prompt="the", dtype="float64", lr=0.001, drop_rate=0.0)


@pytest.fixture(scope="module")
def char_ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm")
    text = folder / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = str(folder / "lm.npz")
    run_lm(dict(LM, tokenizer="char", text=str(text), steps=2), save=path, out=None)
    return path


def test_stride_the_run_used_is_accepted(char_ckpt):
    run_lm({"steps": 3, "stride": 8}, resume=char_ckpt, out=None)
    run_lm({"steps": 3, "stride": None}, resume=char_ckpt, out=None)
    with pytest.raises(ConfigError, match=re.escape("--stride 4 (checkpoint: 8)")):
        run_lm({"steps": 3, "stride": 4}, resume=char_ckpt, out=None)


def test_bpe_vocab_size_the_run_used_is_accepted(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("".join(chr(0x4E00 + i) + " " for i in range(1100)))  # enough pairs for 1024 tokens
    path = str(tmp_path / "bpe.npz")
    run_lm(dict(LM, tokenizer="bpe", text=str(text), steps=1), save=path, out=None)
    run_lm({"steps": 2, "vocab_size": 1024}, resume=path, out=None)
    with pytest.raises(ConfigError, match=re.escape("--vocab-size 512 (checkpoint: 1024)")):
        run_lm({"steps": 2, "vocab_size": 512}, resume=path, out=None)
