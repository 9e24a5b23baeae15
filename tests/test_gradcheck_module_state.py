"""gradcheck refuses a random forward and leaves the module it checks exactly as it was."""

import copy

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


@pytest.mark.parametrize(
    "make",
    [
        lambda: npattn.CausalAttention(3, 2, 6, 0.5, rng=1),
        lambda: npattn.MultiHeadAttention(3, 4, 6, 0.5, num_heads=2, rng=1),
    ],
)
def test_random_forward_is_refused(make):
    module = make()
    with pytest.raises(ConfigError, match=r"is random .*dropout \(p=0\.5\).*\.eval\(\).*fixed_keep"):
        npattn.gradcheck(module, npattn.book_batch(), raise_exception=False)


def test_gpt_random_forward_names_every_dropout():
    cfg = {"vocab_size": 11, "context_length": 5, "emb_dim": 8, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
           "qkv_bias": False}  # fmt: skip
    with pytest.raises(ConfigError, match=r"drop_emb \(p=0\.1\).*trf_blocks\.0\.att\.dropout"):
        npattn.gradcheck(npattn.GPTModel(cfg, rng=1), np.array([[1, 2, 3]]), check_input=False)


def test_deterministic_forwards_still_checked():
    batch = npattn.book_batch()
    assert npattn.gradcheck(npattn.CausalAttention(3, 2, 6, 0.5, rng=1).eval(), batch)
    fixed = npattn.CausalAttention(3, 2, 6, 0.5, rng=1)
    fixed.dropout.fixed_keep = fixed.dropout.keep_mask((2, 6, 6))
    assert npattn.gradcheck(fixed, batch)
    assert npattn.gradcheck(npattn.CausalAttention(3, 2, 6, 0.0, rng=1), batch)  # p = 0 in training mode


def test_module_state_is_left_as_found():
    x = npattn.book_batch()
    module = npattn.CausalAttention(3, 2, 6, 0.5, rng=1, dtype=np.float32)
    params = dict(module.named_parameters())
    params["W_query.weight"].grad = None
    params["W_key.weight"].grad[...] = 3.0
    out = module(x)  # a forward whose backward must still work after the check
    reference = copy.deepcopy(module)
    grad_ids = {name: id(p.grad) for name, p in params.items()}
    module.eval()
    assert npattn.gradcheck(module, x)
    module.train()
    assert params["W_query.weight"].grad is None
    assert {name: id(p.grad) for name, p in params.items()} == grad_ids
    for name, p in reference.named_parameters():
        mine = params[name]
        assert mine.data.dtype == np.float32 and np.array_equal(mine.data, p.data)
        assert (mine.grad is None) == (p.grad is None)
        assert mine.grad is None or np.array_equal(mine.grad, p.grad)
    G = np.random.default_rng(0).standard_normal(out.shape).astype(np.float32)
    assert np.array_equal(module.backward(G), reference.backward(G))
    assert np.array_equal(module(x), reference(x))  # the dropout generator drew nothing
