"""A target of -100 (PyTorch's default ignore_index) is refused with a message that says so."""

import re

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.nn.losses import CrossEntropyLoss, cross_entropy

LOGITS = np.arange(12.0).reshape(4, 3) / 7


@pytest.mark.parametrize("loss", [lambda x, t: CrossEntropyLoss()(x, t), cross_entropy])
def test_a_minus_100_target_mentions_ignore_index(loss):
    with pytest.raises(ConfigError) as info:
        loss(LOGITS, np.array([0, -100, 2, 1]))
    message = str(info.value)
    assert message.startswith("cross_entropy: target classes must lie in [0, 3), got -100..2; ")
    assert "-100 is PyTorch's default ignore_index, but npattn's cross_entropy ignores no targets" in message
    assert "token_cross_entropy_forward(logits, targets, ignore_index)" in message


def test_other_out_of_range_targets_keep_the_plain_message():
    with pytest.raises(ConfigError, match=re.escape("got -1..2") + "$"):
        CrossEntropyLoss()(LOGITS, np.array([0, -1, 2, 1]))
