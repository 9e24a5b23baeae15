"""The message for a value that is not a tokenizer names the tokenizers where they live.

It used to recommend ``gpt2_tokenizer()`` and ``train_tokenizer(kind, text)``, which are not
top-level npattn names (``npattn.gpt2_tokenizer`` is an AttributeError); it now says
``npattn.train.`` and every name it lists is there.
"""

import re

import pytest

import npattn.train
from npattn.errors import ConfigError
from npattn.train.lm import train_lm
from npattn.train.text import create_dataloader_v1
from npattn.train.tokenizer_files import save_tokenizer
from npattn.train.tokenizers import TOKENIZERS_SHOWN

SHOWN = "npattn.train.CharTokenizer, BPETokenizer, gpt2_tokenizer() or train_tokenizer(kind, text)"


def test_every_name_in_the_message_lives_in_npattn_train():
    assert TOKENIZERS_SHOWN == SHOWN
    for name in ("CharTokenizer", "BPETokenizer", "gpt2_tokenizer", "train_tokenizer"):
        assert name in SHOWN and hasattr(npattn.train, name), name


@pytest.mark.parametrize(
    "call",
    [
        lambda: create_dataloader_v1("some text", tokenizer="gpt2"),
        lambda: train_lm(None, [], [], None, 1, 1, 1, "the", None),
        lambda: save_tokenizer("bpe", "t.json"),
    ],
)
def test_the_messages_name_npattn_train(call):
    with pytest.raises(ConfigError, match=re.escape(f"({SHOWN}), got")):
        call()
