"""Operations a BatchLoss refuses (``loss ** 2``, ``2 / loss``, ``abs(loss)``, ``loss - 1``) were all
told "can be scaled by a number, not added to", off the mark for a power or a reciprocal: each
message now names the operation and what a BatchLoss allows."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError

CFG = dict(vocab_size=11, context_length=4, emb_dim=4, n_heads=1, n_layers=1, drop_rate=0.0, qkv_bias=False)


@pytest.mark.parametrize(
    ("op", "shown"),
    [
        (lambda l: l + 1.0, "loss + 1.0"),
        (lambda l: 1.0 + l, "1.0 + loss"),
        (lambda l: l - 1.0, "loss - 1.0"),
        (lambda l: 1.0 - l, "1.0 - loss"),
        (lambda l: l**2, "loss ** 2"),
        (lambda l: 2**l, "2 ** loss"),
        (lambda l: 2 / l, "2 / loss (the loss as a divisor)"),
        (lambda l: abs(l), "abs(loss)"),
    ],
)
def test_each_refusal_names_its_operation(op, shown):
    loss = npattn.calc_loss_batch([[1, 2]], [[2, 3]], npattn.GPTModel(CFG, rng=0, dtype=np.float64))
    with pytest.raises(ConfigError) as info:
        op(loss)
    message = str(info.value)
    assert message.startswith(shown + ": a BatchLoss can only be multiplied or divided by a finite number")
