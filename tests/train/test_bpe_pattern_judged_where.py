"""A BPE split pattern is judged on the training text first (the message says so), then on npattn's
fixed probe text, which the message shows: "a b c" with r"\\w+" used to be refused quoting the
probe text, and a pattern covering the training text was refused with no word of why."""

import re

import pytest

from npattn.errors import ConfigError
from npattn.train.tokenizers import PATTERN_PROBE, BPETokenizer


def test_judged_on_the_training_text_first():
    with pytest.raises(ConfigError, match=re.escape("leaves ' b c' (at offset 1) of the training text outside")):
        BPETokenizer.train("a b c", 260, pattern=r"\w+")


def test_then_on_the_probe_text_which_the_message_shows():
    with pytest.raises(ConfigError) as info:
        BPETokenizer.train("ab ab ab", 258, pattern=r"[ab]+|\s+")
    message = str(info.value)
    assert "(at offset 0) of npattn's fixed probe text" in message and repr(PATTERN_PROBE) in message
    assert "any text encode() may meet, not only the training text" in message
