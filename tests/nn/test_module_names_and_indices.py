"""Module names and container indices a PyTorch user might get wrong: a clear npattn error (or
PyTorch's IndexError, naming the index and the length), never a silently dropped parameter."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, DTypeError


@pytest.mark.parametrize("name", ["a.b", ""])
def test_a_name_state_dict_cannot_hold_is_refused(name):
    m = npattn.Module()
    with pytest.raises(ConfigError, match=r"must be non-empty and without '.'"):
        m.add_module(name, npattn.Linear(2, 2, rng=1))
    with pytest.raises(ConfigError, match=r"must be non-empty and without '.'"):
        m.register_parameter(name, npattn.Parameter(np.zeros(2)))
    assert list(m.state_dict()) == []


def test_assigning_a_non_parameter_over_a_parameter_is_a_dtype_error():
    m = npattn.SelfAttention_v1(3, 2)
    for value in (np.zeros((3, 2), np.float32), None):
        with pytest.raises(DTypeError, match=r"as parameter 'W_query' \(npattn.Parameter expected\)"):
            m.W_query = value


def test_container_indices():
    s = npattn.Sequential(npattn.Linear(2, 3, rng=1))
    assert s[0] is s[-1] and s[np.int64(0)] is s[0]
    with pytest.raises(IndexError, match=r"Sequential index 5 is out of range: it holds 1 modules"):
        s[5]
    with pytest.raises(DTypeError, match=r"indices must be integers or slices, got str"):
        s["0"]
    with pytest.raises(IndexError, match=r"ModuleList index -3 is out of range"):
        npattn.ModuleList([npattn.Linear(2, 2), npattn.Linear(2, 2)])[-3]


def test_to_takes_torch_float_dtypes_and_refuses_wider_than_float64():
    torch = pytest.importorskip("torch")
    m = npattn.SelfAttention_v1(3, 2)
    assert m.to(torch.float64).W_query.dtype == np.float64
    with pytest.raises(DTypeError, match="got float128"):
        m.to(np.longdouble)
    with pytest.raises(DTypeError, match="got 'bfloat16'"):
        m.to(torch.bfloat16)


def test_apply_visits_children_first_then_self_like_torch():
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1)
    seen = []
    assert m.apply(lambda module: seen.append(type(module).__name__)) is m
    assert seen == ["Linear", "Linear", "Linear", "Linear", "Dropout", "MultiHeadAttention"]
