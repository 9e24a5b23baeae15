"""The PyTorch habits a line-by-line port of the book relies on: one seed for several modules,
the book's dropout cells, frozen parameters, numel, Sequential, ``to("cpu")``, torch tensors in."""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from book_digits import DROPOUT_ATTN_WEIGHTS, DROPOUT_ONES

import npattn
from npattn.optim import SGD

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def causal_attn_weights() -> np.ndarray:
    """Section 3.5's causal attention weights, computed as the book does (float32)."""
    inputs = npattn.book_inputs()
    sa_v2 = npattn.SelfAttention_v2(3, 2, rng=789)
    queries, keys = sa_v2.W_query(inputs), sa_v2.W_key(inputs)
    attn_scores = queries @ keys.T
    masked = np.where(np.triu(np.ones((6, 6), dtype=bool), k=1), -np.inf, attn_scores)
    scaled = masked / np.float32(keys.shape[-1] ** 0.5)
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_the_books_dropout_cells():
    npattn.manual_seed(123)
    dropout = npattn.Dropout(0.5)  # draws from the default generator, like torch.nn.Dropout
    example = np.ones((6, 6), dtype=np.float32)
    np.testing.assert_array_equal(dropout(example), DROPOUT_ONES)
    npattn.manual_seed(123)
    out = dropout(causal_attn_weights())
    np.testing.assert_allclose(out, DROPOUT_ATTN_WEIGHTS, atol=1e-4, rtol=0)
    assert np.array_equal(out == 0, np.asarray(DROPOUT_ATTN_WEIGHTS) == 0)


def test_one_seed_then_several_modules_continues_the_stream():
    npattn.manual_seed(123)
    a, b = npattn.SelfAttention_v1(3, 2), npattn.CausalAttention(3, 2, 6, 0.0)
    g = npattn.TorchGenerator(123)  # the same draws, from one explicit generator
    a2, b2 = npattn.SelfAttention_v1(3, 2, rng=g), npattn.CausalAttention(3, 2, 6, 0.0, rng=g)
    for ours, expected in ((a, a2), (b, b2)):
        for key, value in expected.state_dict().items():
            np.testing.assert_array_equal(ours.state_dict()[key], value, err_msg=key)
    # rng=123 twice gives two identical modules; rng=None twice does not
    assert np.array_equal(npattn.SelfAttention_v1(3, 2, rng=123).W_query.data, a2.W_query.data)
    assert not np.array_equal(npattn.SelfAttention_v1(3, 2).W_query.data, npattn.SelfAttention_v1(3, 2).W_query.data)


def test_numel_counts_parameters_like_the_book():
    mha = npattn.MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12, rng=0)
    assert sum(p.numel() for p in mha.parameters()) == 2_360_064  # 3 * 768 * 768 + 768 * 768 + 768


def test_a_frozen_parameter_gets_no_gradient_and_no_update():
    model = npattn.CausalAttention(3, 2, 6, 0.0, qkv_bias=True, rng=1, dtype=np.float64)
    model.W_key.weight.requires_grad = False
    assert model.W_key.weight.grad is None
    frozen = model.W_key.weight.data.copy()
    out = model(npattn.book_batch())
    model.backward(np.ones_like(out))
    assert model.W_key.weight.grad is None and np.any(model.W_key.bias.grad != 0)
    SGD(model.parameters(), lr=0.1).step()
    np.testing.assert_array_equal(model.W_key.weight.data, frozen)
    model.zero_grad()
    model.requires_grad_(False)
    assert all(p.grad is None and not p.requires_grad for p in model.parameters())
    model.requires_grad_()
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    with pytest.raises(npattn.ConfigError, match="requires_grad"):
        npattn.Parameter(np.zeros(2), requires_grad="no")


def test_sequential_keys_forward_and_backward():
    npattn.manual_seed(0)
    seq = npattn.Sequential(npattn.Linear(3, 4), npattn.Dropout(0.0), npattn.Linear(4, 2))
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(seq) == 3 and isinstance(seq[2], npattn.Linear)
    seq.double()
    x = np.random.default_rng(0).standard_normal((5, 3))
    np.testing.assert_array_equal(seq(x), seq[2](seq[1](seq[0](x))))
    report = npattn.gradcheck(seq, x)
    assert report.passed
    named = npattn.Sequential(OrderedDict(first=npattn.Linear(2, 2, rng=1)))
    assert list(named.state_dict()) == ["first.weight", "first.bias"]
    with pytest.raises(TypeError, match=r"npattn\.Module"):
        npattn.Sequential(npattn.Linear(2, 2, rng=1), np.tanh)


def test_sequential_backward_runs_in_reverse():
    calls = []

    class Spy(npattn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def forward(self, x):
            return x

        def backward(self, grad_output):
            calls.append(self.name)
            return grad_output

    seq = npattn.Sequential(Spy("a"), Spy("b"), Spy("c"))
    seq.backward(seq(np.ones(2)))
    assert calls == ["c", "b", "a"]


def test_to_cpu_is_accepted_other_devices_are_refused():
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    assert model.to("cpu") is model and model.W_query.dtype == np.float32
    assert model.to("float64").W_query.dtype == np.float64
    with pytest.raises(npattn.ConfigError, match=r"CPU only.*'cuda'"):
        model.to("cuda")


class FakeTensor:
    """What npattn sees of a torch tensor: detach, cpu and numpy (torch is never imported)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def detach(self) -> FakeTensor:
        return self

    def cpu(self) -> FakeTensor:
        return self

    def numpy(self) -> np.ndarray:
        return self.values

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")


def test_tensor_like_inputs_are_detached():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    np.testing.assert_array_equal(model(FakeTensor(x)), model(x))


@pytest.mark.torch
def test_torch_tensors_that_require_grad_are_accepted():
    torch = pytest.importorskip("torch")
    x = torch.tensor(npattn.book_inputs(), requires_grad=True)
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    np.testing.assert_array_equal(model(x), model(npattn.book_inputs()))
    assert model.to(torch.device("cpu")) is model
    with pytest.raises(npattn.ConfigError, match="CPU only"):
        model.to(torch.device("meta"))


@pytest.mark.torch
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_training_mode_dropout_matches_torch(p):
    """The book's MultiHeadAttention with dropout, in training mode: construction and every
    dropout mask come from one seeded stream, in torch and in npattn."""
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("make_parity_fixtures", FIXTURES / "make_parity_fixtures.py")
    book = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book)
    batch = npattn.book_batch()
    torch.manual_seed(123)
    theirs = book.CLASSES["MultiHeadAttention"](3, 4, 6, p, num_heads=2)
    expected = [theirs(torch.tensor(batch)).detach().numpy() for _ in range(2)]
    npattn.manual_seed(123)
    ours = npattn.MultiHeadAttention(3, 4, 6, p, num_heads=2)
    for want in expected:  # same masks; the matmuls round differently (a wrong mask moves values by ~0.1)
        np.testing.assert_allclose(ours(batch), want, rtol=0, atol=1e-6)
    torch.manual_seed(5)
    x = torch.rand(40, 30)
    npattn.manual_seed(5)
    x_ours = npattn.default_generator.rand(40, 30)
    np.testing.assert_array_equal(npattn.Dropout(p)(x_ours), torch.nn.Dropout(p)(x).numpy())
