"""PyTorch's container edits (``seq[i] = m``, ``del seq[i]``, renumbering as PyTorch does) and
``Module.to(tensor)`` / ``to(..., non_blocking=)``; a Sequential whose children change between
forward and backward refuses the backward instead of differentiating another network."""

from collections import OrderedDict

import numpy as np
import pytest

import npattn
from npattn.nn import Linear, ModuleList, Sequential

X = np.random.default_rng(0).standard_normal((4, 2))


def _seq(**named):
    return Sequential(OrderedDict(named)) if named else Sequential(Linear(2, 3), Linear(3, 3), Linear(3, 1))


def test_setitem_replaces_the_module_under_its_name():
    seq, new = _seq(), Linear(3, 3)
    seq[1] = new
    assert seq[1] is new and list(seq._modules) == ["0", "1", "2"]
    seq(X)
    seq.backward(np.ones((4, 1)))
    with pytest.raises(IndexError, match="index 5 is out of range: it holds 3 modules"):
        seq[5] = Linear(1, 1)
    with pytest.raises(npattn.ConfigError, match="the same Linear instance would sit at"):
        seq[1] = seq[0]


@pytest.mark.parametrize("container", [Sequential, ModuleList])
def test_delitem_renumbers_like_pytorch(container):
    torch = pytest.importorskip("torch")
    ours = container([Linear(2, 3), Linear(3, 3), Linear(3, 1)]) if container is ModuleList else _seq()
    theirs = getattr(torch.nn, container.__name__)(
        *([[torch.nn.Linear(2, 3), torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)]] if container is ModuleList else
          [torch.nn.Linear(2, 3), torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)])
    )  # fmt: skip
    kept = ours[2]
    del ours[1]
    del theirs[1]
    assert list(ours._modules) == list(theirs._modules) == ["0", "1"] and ours[1] is kept
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_delitem_of_named_children_and_slices_renumbers_too():
    seq = _seq(a=Linear(2, 3), b=Linear(3, 3), c=Linear(3, 1))
    del seq[0:2]
    assert list(seq._modules) == ["0"] and list(seq.state_dict()) == ["0.weight", "0.bias"]


@pytest.mark.parametrize("edit", ["delete", "replace", "append"])
def test_children_changed_between_forward_and_backward_refuse_the_backward(edit):
    seq, other = _seq(), Linear(3, 3)
    other(np.ones((4, 3)))  # a cache of its own, from before seq's forward: its backward would run
    seq(X)
    if edit == "delete":
        del seq[1]
    elif edit == "replace":
        seq[1] = other
    else:
        seq.append(Linear(1, 1))
    with pytest.raises(npattn.BackwardError, match="since the last forward"):
        seq.backward(np.ones((4, 1)))
    assert all(not np.any(p.grad) for p in seq.parameters())


def test_to_takes_a_tensor_or_an_array_for_its_dtype_and_accepts_non_blocking():
    torch = pytest.importorskip("torch")
    m = npattn.SelfAttention_v1(3, 2, rng=0)
    assert m.to(torch.zeros(1, dtype=torch.float64)).W_query.data.dtype == np.float64
    assert m.to(np.zeros(1, np.float32)).W_query.data.dtype == np.float32
    assert m.to(np.float64, non_blocking=True).W_query.data.dtype == np.float64
    with pytest.raises(npattn.DTypeError, match="got int64"):
        m.to(torch.zeros(1, dtype=torch.int64))
    with pytest.raises(npattn.ConfigError, match="got device 'meta'"):
        m.to(torch.zeros(1, device="meta"))
    with pytest.raises(npattn.ConfigError, match="non_blocking must be True or False"):
        m.to(np.float32, non_blocking="yes")
