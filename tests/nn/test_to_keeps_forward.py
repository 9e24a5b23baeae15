"""One rule for ``Module.to`` between forward and backward: a call that changes nothing (the CPU,
the dtype every floating array already has) keeps the arrays and the forward; a call that changes
the dtype discards the forward, and backward then raises the usual clear error. Every attention
class and the GPT."""

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES

import npattn

GPT = {
    "vocab_size": 11,
    "context_length": 6,
    "emb_dim": 4,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": True,
}


def _models():
    x = np.random.default_rng(0).random((2, 5, 3))
    for case in ATTENTION_CASES:
        yield case.name, lambda case=case: case.build(3, 2, 0, np.float64), x, (2, 5, 2)
    ids = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    yield "GPTModel", lambda: npattn.GPTModel(GPT, rng=0, dtype=np.float64), ids, (2, 5, 11)


MODELS = list(_models())


def _grads(model):
    return {name: p.grad.copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("name,build,x,out_shape", MODELS, ids=[m[0] for m in MODELS])
@pytest.mark.parametrize("call", ["cpu", np.float64, "float64", ("cpu", np.float64)], ids=str)
def test_a_to_that_changes_nothing_keeps_the_forward(name, build, x, out_shape, call):
    g = np.random.default_rng(1).random(out_shape)
    plain = build()
    plain(x)
    plain.backward(g)
    model = build()
    model(x)
    arrays = [p.data for p in model.parameters()]
    assert model.to(*call if isinstance(call, tuple) else (call,)) is model
    assert all(p.data is a for p, a in zip(model.parameters(), arrays)), "to() copied arrays it did not change"
    model.backward(g)
    for key, grad in _grads(plain).items():
        np.testing.assert_array_equal(_grads(model)[key], grad)


@pytest.mark.parametrize("name,build,x,out_shape", MODELS, ids=[m[0] for m in MODELS])
@pytest.mark.parametrize("call", [np.float32, ("cpu", "float32")], ids=str)
def test_a_to_that_changes_the_dtype_discards_the_forward(name, build, x, out_shape, call):
    model = build()
    model(x)
    model.to(*call if isinstance(call, tuple) else (call,))
    assert all(p.dtype == np.float32 for p in model.parameters())
    with pytest.raises(npattn.BackwardError, match=r"called after to\(\), which discarded the last forward"):
        model.backward(np.ones(out_shape, np.float32))
    model(x)  # a new forward in the new dtype, and backward works again
    model.backward(np.ones(out_shape, np.float32))
