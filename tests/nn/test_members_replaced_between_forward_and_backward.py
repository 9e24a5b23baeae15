"""A parameter or submodule replaced (same shape or not), removed or added between forward and
backward is a BackwardError naming it, and no gradient changes: a same-shape replacement took the
forward's gradient in the used parameter's place, silently (torch's autograd gives it to the tensor
the forward used); a removed one was Python's AttributeError."""

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError

RNG = np.random.default_rng(0)
X3, G4 = RNG.normal(size=(1, 5, 3)), RNG.normal(size=(1, 5, 4))


def _grads(module):
    return [None if p.grad is None else p.grad.copy() for p in module.parameters()]


def _refused(module, grad_output, said, old=None):
    before = _grads(module)
    with pytest.raises(BackwardError, match=said):
        module.backward(grad_output)
    after = _grads(module)
    assert all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(before, after))
    if old is not None:
        assert old.grad is None or not np.any(old.grad)


def test_a_parameter_replaced_by_one_of_the_same_shape():
    m = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    m(X3[0])
    old = m.W_query
    m.W_query = npattn.Parameter(old.data * 2)
    _refused(m, np.ones((5, 2)), "parameter 'W_query' was replaced by another object since the last forward", old)


def test_a_submodules_parameter_replaced_in_a_multi_head_module():
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64)
    m(X3)
    old = m.W_query.weight
    m.W_query.weight = npattn.Parameter(old.data * 2)
    _refused(m, G4, "parameter 'W_query.weight' was replaced", old)


def test_weights_tied_after_the_forward():
    cfg = {"vocab_size": 10, "context_length": 4, "emb_dim": 4, "n_heads": 1, "n_layers": 1, "drop_rate": 0.0,
           "qkv_bias": False}  # fmt: skip
    g = npattn.GPTModel(cfg, rng=1, dtype=np.float64)
    out = g(np.array([[1, 2, 3]]))
    g.out_head.weight = g.tok_emb.weight
    _refused(g, np.ones_like(out), r"Linear.backward\(\): its parameter 'weight' was replaced")


def test_a_parameter_removed_and_a_submodule_replaced():
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    m(npattn.book_inputs())
    del m.W_query
    _refused(m, np.ones((6, 2), np.float32), "parameter 'W_query' was removed since the last forward")
    mha = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64)
    mha(X3)
    mha.out_proj = npattn.Linear(4, 4, dtype=np.float64)
    _refused(mha, G4, "submodule 'out_proj' was replaced by another object since the last forward")


def test_an_unchanged_module_and_a_fresh_forward_still_work():
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64)
    m(X3)
    m.W_query.weight = npattn.Parameter(m.W_query.weight.data * 2)
    m(X3)  # the forward again: its gradients are the new parameter's
    m.backward(G4)
    assert np.any(m.W_query.weight.grad)


def test_forward_called_directly_and_parameters_made_in_forward_are_fine():
    x = np.ones((2, 3), np.float32)
    layer = npattn.Linear(3, 4)
    y = layer.forward(x)  # not through __call__: nothing recorded, nothing refused
    layer.backward(np.ones_like(y))

    class Lazy(npattn.Module):
        def forward(self, x):
            if "w" not in self._parameters:
                self.w = npattn.Parameter(np.ones(3))  # made by its first forward
            self._x = x
            return x * self.w.data

        def _gradients(self, g):
            return g * self.w.data, [(self.w, (g * self._x).sum(0))]

    lazy = Lazy()
    lazy(np.ones((2, 3)))
    lazy.backward(np.ones((2, 3)))
    assert np.array_equal(lazy.w.grad, [2.0, 2.0, 2.0])


def test_a_failed_forward_between_does_not_hide_a_replacement():
    layer = npattn.Linear(3, 4, rng=0)
    x = np.ones((2, 3), np.float32)
    y = layer(x)
    old = layer.weight
    layer.weight = npattn.Parameter(np.zeros((4, 3), np.float32))
    with pytest.raises(npattn.ShapeError):
        layer(np.ones((2, 5), np.float32))
    _refused(layer, np.ones_like(y), "parameter 'weight' was replaced", old)
