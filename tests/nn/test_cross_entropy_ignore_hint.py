"""A negative target (what PyTorch's ignore_index marks: -100 by default, -1 when given) is refused
with a message that says so; a target past the classes gets the plain range message."""

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
    assert "a negative target is what PyTorch's ignore_index marks (-100 by default" in message
    assert "npattn's cross_entropy ignores no targets" in message
    assert "token_cross_entropy_forward(logits, targets, ignore_index)" in message


def test_a_target_of_the_ignore_index_given_mentions_it_too():
    with pytest.raises(ConfigError, match=re.escape("got -1..2; a negative target is what PyTorch's ignore_index")):
        CrossEntropyLoss(ignore_index=-1)(LOGITS, np.array([0, -1, 2, 1]))


def test_targets_past_the_classes_keep_the_plain_message():
    with pytest.raises(ConfigError, match=re.escape("got 0..3") + "$"):
        CrossEntropyLoss()(LOGITS, np.array([0, 3, 2, 1]))
