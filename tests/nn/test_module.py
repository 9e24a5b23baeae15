"""Parameter and Module: PyTorch's semantics for registration, state dicts, modes and grads."""

from collections import OrderedDict

import numpy as np
import pytest

import npattn
from npattn import Module, ModuleList, Parameter


class Inner(Module):
    def __init__(self):
        super().__init__()
        self.weight = Parameter(np.arange(6.0).reshape(2, 3))
        self.register_buffer("mask", np.triu(np.ones((2, 2), dtype=bool), 1))
        self.register_buffer("scratch", np.zeros(2), persistent=False)


class Outer(Module):
    def __init__(self):
        super().__init__()
        self.first = Parameter(np.ones(2, dtype=np.float32))
        self.inner = Inner()
        self.heads = ModuleList([Inner(), Inner()])


def test_parameter_basics():
    p = Parameter(np.ones((3, 2), dtype=np.float32))
    assert p.shape == (3, 2) and p.dtype == np.float32 and p.ndim == 2 and p.size == 6
    assert p.grad.shape == (3, 2) and p.grad.dtype == np.float32 and not p.grad.any()
    assert "Parameter(shape=(3, 2), dtype=float32)" in repr(p)
    np.testing.assert_array_equal(np.asarray(p), p.data)
    q = Parameter([[1, 2], [3, 4]])
    assert q.dtype == np.float64
    with pytest.raises(npattn.DTypeError):
        Parameter(np.array(["a"]))
    p.data = np.zeros((4,), dtype=np.float64)
    assert p.grad.shape == (4,) and p.grad.dtype == np.float64


def test_registration_order_and_dotted_names():
    m = Outer()
    names = [name for name, _ in m.named_parameters()]
    assert names == ["first", "inner.weight", "heads.0.weight", "heads.1.weight"]
    assert len(list(m.parameters())) == 4
    assert [name for name, _ in m.named_modules()] == ["", "inner", "heads", "heads.0", "heads.1"]
    assert [name for name, _ in m.named_children()] == ["inner", "heads"]
    assert list(m.state_dict()) == [
        "first",
        "inner.weight",
        "inner.mask",
        "heads.0.weight",
        "heads.0.mask",
        "heads.1.weight",
        "heads.1.mask",
    ]
    assert isinstance(m.state_dict(), OrderedDict)


def test_shared_parameter_listed_once():
    m = Outer()
    m.heads[1].weight = m.heads[0].weight
    assert len(list(m.parameters())) == 3


def test_reassignment_rules():
    m = Inner()
    with pytest.raises(TypeError, match="Parameter expected"):
        m.weight = np.zeros((2, 3))
    m.mask = np.zeros((2, 2), dtype=bool)
    assert not m.state_dict()["mask"].any()
    with pytest.raises(TypeError, match="buffer"):
        m.mask = [1, 2]
    del m.weight
    assert list(m.state_dict()) == ["mask"]
    with pytest.raises(AttributeError, match=r"before Module\.__init__"):

        class Bad(Module):
            def __init__(self):
                self.w = Parameter(np.zeros(1))

        Bad()


def test_state_dict_is_a_copy():
    m = Inner()
    sd = m.state_dict()
    sd["weight"][...] = 99
    assert m.weight.data[0, 0] == 0


def test_load_state_dict_copies_in_place_and_keeps_dtype():
    m = Outer()
    target = m.first.data
    state = {k: np.full_like(v, 2) for k, v in m.state_dict().items()}
    state["first"] = np.full(2, 2.0, dtype=np.float64)
    result = m.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert m.first.data is target and target.dtype == np.float32 and np.all(target == 2)


def test_load_state_dict_strict_lists_every_problem_and_changes_nothing():
    m = Outer()
    before = m.state_dict()
    state = dict(before)
    del state["inner.weight"]
    state["extra"] = np.zeros(1)
    state["first"] = np.zeros(5)
    state["heads.0.weight"] = np.full((2, 3), np.nan)
    with pytest.raises(npattn.StateDictError) as info:
        m.load_state_dict(state)
    msg = str(info.value)
    assert 'Missing key(s) in state_dict: "inner.weight"' in msg
    assert 'Unexpected key(s) in state_dict: "extra"' in msg
    assert "size mismatch for first" in msg and "(5,)" in msg and "(2,)" in msg
    assert "non-finite values in heads.0.weight" in msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_load_state_dict_non_strict():
    m = Outer()
    result = m.load_state_dict({"first": np.array([5.0, 6.0]), "nope": np.zeros(1)}, strict=False)
    assert "inner.weight" in result.missing_keys and result.unexpected_keys == ["nope"]
    np.testing.assert_array_equal(m.first.data, [5, 6])
    with pytest.raises(npattn.StateDictError, match="size mismatch"):
        m.load_state_dict({"first": np.zeros(3)}, strict=False)


def test_train_eval_propagate():
    m = Outer()
    assert m.eval() is m
    assert all(not mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())


def test_to_dtype_and_zero_grad():
    m = Outer()
    m.first.grad += 1
    assert m.to(np.float64) is m
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in m.parameters())
    assert m.inner.mask.dtype == bool
    assert m.first.grad[0] == 1
    m.zero_grad()
    assert not any(p.grad.any() for p in m.parameters())
    with pytest.raises(npattn.DTypeError):
        m.to(np.int32)


def test_repr_lists_parameters_and_children():
    text = repr(Outer())
    assert "(first): Parameter(shape=(2,), dtype=float32)" in text
    assert "(inner): Inner(" in text and "(mask): buffer(shape=(2, 2), dtype=bool)" in text
    assert "(0): Inner(" in text


def test_call_is_forward_and_missing_methods():
    class Double(Module):
        def forward(self, x):
            return 2 * x

    assert Double()(3) == 6
    with pytest.raises(NotImplementedError):
        Module()(1)
    with pytest.raises(NotImplementedError):
        Module().backward(1)
