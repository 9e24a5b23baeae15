"""One module instance used twice in one forward: refused (Sequential) or caught in backward,
never a silently wrong weight gradient; a Sequential's slice is a Sequential."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError, ConfigError


def test_sequential_refuses_one_instance_at_two_positions() -> None:
    l = npattn.Linear(3, 3)
    with pytest.raises(ConfigError, match=r"Linear instance would sit at '0' and '2'.*second instance"):
        npattn.Sequential(l, npattn.GELU(), l)
    d = npattn.Dropout(0.5)
    with pytest.raises(ConfigError, match=r"Dropout instance would sit at '1' and '3'"):
        npattn.Sequential(npattn.Linear(3, 3), d, npattn.Linear(3, 3), d)
    with pytest.raises(ConfigError, match=r"'0' and '1\.0'"):
        npattn.Sequential(l, npattn.Sequential(l))
    s = npattn.Sequential(l)
    with pytest.raises(ConfigError, match=r"'0' and '1'"):
        s.append(l)
    assert len(s) == 1
    s.add_module("0", l)  # the same instance again under its own name replaces itself: fine
    s.add_module("0", npattn.Linear(3, 3))
    s.append(l)
    assert len(s) == 2


class _Twice(npattn.Module):
    """A forward of one's own calling one submodule twice."""

    def __init__(self, inner: npattn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.inner(self.inner(x))

    def backward(self, grad_output: np.ndarray) -> np.ndarray:
        return self.inner.backward(self.inner.backward(grad_output))


def test_a_submodule_called_twice_in_one_forward_refuses_backward() -> None:
    rng = np.random.default_rng(0)
    x, G = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    lin = npattn.Linear(3, 3).double()
    m = _Twice(lin)
    m(x)
    twice = r"Linear.backward\(\): this instance ran more than once in one forward of _Twice"
    with pytest.raises(BackwardError, match=twice):
        m.backward(G)
    assert not lin.weight.grad.any()
    # each forward of its own: the last one is differentiated (two top-level calls are two passes)
    lin(x)
    lin(x * 2)
    lin.backward(G)
    np.testing.assert_allclose(lin.weight.grad, G.T @ (x * 2))
    m2 = _Twice(npattn.Dropout(0.5))  # a Dropout's mask too
    m2(x)
    with pytest.raises(BackwardError, match="Dropout"):
        m2.backward(G)


def test_the_separate_instances_match_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, G = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    l1, l2 = npattn.Linear(3, 3).double(), npattn.Linear(3, 3).double()
    l2.load_state_dict(l1.state_dict())  # the same weights in two instances
    s = npattn.Sequential(l1, npattn.GELU(), l2)
    s(x)
    dx = s.backward(G)
    tl = torch.nn.Linear(3, 3).double()
    with torch.no_grad():
        tl.weight.copy_(torch.from_numpy(l1.weight.data))
        tl.bias.copy_(torch.from_numpy(l1.bias.data))
    tx = torch.from_numpy(x).requires_grad_()

    class BookGELU(torch.nn.Module):  # the book's GELU (its constant is a float32 tensor)
        def forward(self, z):  # type: ignore[no-untyped-def]
            c = torch.sqrt(torch.tensor(2.0 / torch.pi))
            return 0.5 * z * (1 + torch.tanh(c * (z + 0.044715 * torch.pow(z, 3))))

    (torch.nn.Sequential(tl, BookGELU(), tl)(tx) * torch.from_numpy(G)).sum().backward()
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(l1.weight.grad + l2.weight.grad, tl.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_a_slice_of_a_sequential_is_a_sequential() -> None:
    a, g, b = npattn.Linear(3, 4), npattn.GELU(), npattn.Linear(4, 2)
    s = npattn.Sequential(OrderedDict(first=a, act=g, last=b))
    head = s[0:2]
    assert type(head) is npattn.Sequential and list(head) == [a, g]
    assert list(head.state_dict()) == ["first.weight", "first.bias"]  # the names stay, as in PyTorch
    assert s[-1] is b and type(s[1:]) is npattn.Sequential
    x = np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(head(x), g(a(x)))
    ml = npattn.ModuleList([a, g, b])[1:]
    assert type(ml) is npattn.ModuleList and list(ml) == [g, b]
