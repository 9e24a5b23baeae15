"""A training text that gives no batch because of the stride says so: the stride, the windows it
leaves and the largest stride that gives a batch (the message used to blame the text's length)."""

import re

import pytest

from npattn import CharTokenizer, GPTModel
from npattn.errors import ConfigError
from npattn.optim import AdamW
from npattn.train.lm import train_lm
from npattn.train.lm_run import run_lm
from npattn.train.text import DataLoader, GPTDatasetV1, largest_stride

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, steps=2,
          eval_iter=1, sample_tokens=2, prompt="t")


@pytest.mark.parametrize(
    ("n", "max_length", "windows"), [(20, 8, 2), (20, 8, 3), (20, 8, 12), (10, 8, 2), (100, 7, 13)]
)
def test_largest_stride_is_the_largest(n, max_length, windows):
    def count(stride):
        return len(GPTDatasetV1(None, None, max_length, stride, token_ids=range(n)))

    best = largest_stride(GPTDatasetV1(None, None, max_length, 1, token_ids=range(n)), windows)
    assert best is not None and count(best) >= windows and count(best + 1) < windows
    assert count(1) >= windows  # one window: any stride gives it
    assert largest_stride(GPTDatasetV1(None, None, max_length, 1, token_ids=range(n)), 1) >= best


def test_largest_stride_none_when_the_text_is_too_short():
    assert largest_stride(GPTDatasetV1(None, None, 8, 1, token_ids=range(10)), 3) is None
    assert largest_stride(GPTDatasetV1(None, None, 8, 1, token_ids=range(8)), 1) is None


def test_run_lm_names_the_stride(tmp_path):
    text = tmp_path / "small.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 134)  # 6030 characters, 5427 for training
    message = (
        "gives no batch of 2 windows of context_length + 1 = 9 tokens: a window starts every --stride 1000000000 "
        "tokens, which leaves 1 window; use --stride 5418 or less, or a longer text"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        run_lm(dict(LM, text=str(text), stride=1_000_000_000), out=None)
    text.write_text("the lazy dog" * 10)  # 108 training tokens: a stride of 8 (the default) leaves 13 windows
    with pytest.raises(ConfigError, match=r"--stride 8 tokens \(the context length, when not given\), which "
                                          r"leaves 13 windows; use a longer text"):
        run_lm(dict(LM, text=str(text), batch_size=101), out=None)
    with pytest.raises(ConfigError, match=r"leaves 13 windows; use --stride 1, or a longer text"):
        run_lm(dict(LM, text=str(text), batch_size=100), out=None)
    with pytest.raises(ConfigError, match=r"--stride 8 tokens .* leaves 13 windows; use --stride 6 or less, or"):
        run_lm(dict(LM, text=str(text), batch_size=17), out=None)


def test_train_lm_names_the_stride():
    tok = CharTokenizer.train("the lazy dog")
    model = GPTModel({"vocab_size": tok.vocab_size, "context_length": 8, "emb_dim": 4, "n_heads": 1,
                      "n_layers": 1, "drop_rate": 0.0, "qkv_bias": False}, rng=0)
    loader = DataLoader(GPTDatasetV1(None, None, 8, 50, token_ids=[1] * 100), 3, drop_last=True)
    message = (
        "the training data gives no batch: 2 windows of 8 tokens for batches of 3 (a window starts every "
        "stride = 50 tokens of its 100); use a stride of at most 45, or a longer text"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        train_lm(model, loader, loader, AdamW(model.parameters()), 1, 1, 1, "t", tok, out=None)
