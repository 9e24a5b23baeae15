"""A BatchLoss scales as a PyTorch loss does in gradient accumulation: ``(loss / 4).backward()``
gives a quarter of the gradients (``loss * 2`` raised Python's TypeError); adding losses is a
ConfigError saying what to do instead; a second backward of one batch names the loss, not the
stage's internals."""

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError, ConfigError

CFG = dict(vocab_size=20, context_length=6, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
X = np.random.default_rng(0).integers(0, 20, (2, 6))
Y = np.random.default_rng(1).integers(0, 20, (2, 6))


def grads_of(make_loss):
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    loss = make_loss(npattn.calc_loss_batch(X, Y, model))
    loss.backward()
    return float(loss), {name: p.grad.copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("make", "factor"),
    [
        (lambda l: l / 4, 0.25),
        (lambda l: l * 2, 2.0),
        (lambda l: 3 * l, 3.0),
        (lambda l: -l, -1.0),
        (lambda l: l * np.float32(0.5), 0.5),
        (lambda l: l * np.array(2.0), 2.0),
        (lambda l: l / np.array(4.0), 0.25),
    ],
    ids=["/4", "*2", "3*", "neg", "*np.float32", "*0-d array", "/0-d array"],
)
def test_a_scaled_loss_scales_the_gradients(make, factor):
    value, plain = grads_of(lambda l: l)
    scaled_value, scaled = grads_of(make)
    assert scaled_value == pytest.approx(value * factor, rel=1e-15)
    for name in plain:
        np.testing.assert_allclose(scaled[name], plain[name] * factor, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize(
    "bad",
    [lambda l: l * np.nan, lambda l: l / 0, lambda l: l * "2", lambda l: l * np.ones(2), lambda l: l * 1e308 * 10],
)
def test_scaling_by_anything_but_a_finite_number_is_refused(bad):
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    with pytest.raises(ConfigError, match="a BatchLoss is"):
        bad(npattn.calc_loss_batch(X, Y, model))


def test_adding_losses_says_what_to_do():
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    loss = npattn.calc_loss_batch(X, Y, model)
    adds = (lambda: loss + loss, lambda: loss + 1.0, lambda: 1.0 + loss, lambda: loss - 1.0, lambda: loss**2)
    for add in (*adds, lambda: abs(loss), lambda: 1 / loss):
        with pytest.raises(ConfigError, match=r"call backward\(\) on each loss"):
            add()


def test_a_second_backward_of_one_batch_names_the_loss():
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    loss = npattn.calc_loss_batch(X, Y, model)
    loss.backward()
    with pytest.raises(BackwardError, match=r"this batch's backward already ran .*calc_loss_batch"):
        (loss / 2).backward()
