"""A batch loss's backward refuses to run after its model ran another forward."""

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError

CFG = {"vocab_size": 20, "context_length": 4, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip


def test_backward_after_another_forward_of_the_same_shape_raises():
    g = npattn.GPTModel(CFG, rng=2, dtype=np.float64)
    loss = npattn.calc_loss_batch(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]), g)
    g.eval()
    g(np.array([[7, 8, 9]]))
    with pytest.raises(BackwardError, match="another forward after this loss was computed"):
        loss.backward()
    assert g.tok_emb.weight.grad is None or not g.tok_emb.weight.grad.any()


def test_backward_after_a_direct_forward_call_raises():
    g = npattn.GPTModel(CFG, rng=2, dtype=np.float64)
    loss = npattn.calc_loss_batch(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]), g)
    g.forward(np.array([[7, 8, 9]]))  # bypasses model(): no forward counted, but a new cache
    with pytest.raises(BackwardError, match="another forward after this loss was computed"):
        loss.backward()
    assert g.tok_emb.weight.grad is None or not g.tok_emb.weight.grad.any()


def test_the_latest_loss_still_backpropagates_and_matches_a_fresh_one():
    g = npattn.GPTModel(CFG, rng=2, dtype=np.float64)
    old = npattn.calc_loss_batch(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]), g)
    new = npattn.calc_loss_batch(np.array([[1, 2, 3]]), np.array([[2, 3, 4]]), g)
    new.backward()
    grad = g.tok_emb.weight.grad.copy()
    with pytest.raises(BackwardError):
        old.backward()
    np.testing.assert_array_equal(g.tok_emb.weight.grad, grad)
