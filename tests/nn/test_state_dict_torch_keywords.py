"""Module.state_dict takes torch's keywords (prefix, keep_vars, destination) and load_state_dict
torch's assign (False; True is refused clearly): they were Python TypeErrors."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def test_state_dict_prefix_destination_and_keep_vars_as_torch():
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    assert list(m.state_dict(prefix="enc.")) == ["enc.W_query", "enc.W_key", "enc.W_value"]
    into: dict = {}
    assert m.state_dict(destination=into, prefix="a.") is into and list(into) == ["a.W_query", "a.W_key", "a.W_value"]
    copied, live = m.state_dict(), m.state_dict(keep_vars=True)
    assert live["W_query"] is m.W_query.data and copied["W_query"] is not m.W_query.data
    with pytest.raises(ConfigError, match="prefix must be a str"):
        m.state_dict(prefix=1)
    with pytest.raises(ConfigError, match="keep_vars"):
        m.state_dict(keep_vars="yes")


def test_load_state_dict_assign():
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    other = npattn.SelfAttention_v1(3, 2, rng=2).state_dict()
    before = m.state_dict()
    with pytest.raises(ConfigError, match=r"assign=True\) is not supported"):
        m.load_state_dict(other, assign=True)
    assert all(np.array_equal(before[k], v) for k, v in m.state_dict().items())  # nothing changed
    m.load_state_dict(other, assign=False)
    assert all(np.array_equal(other[k], v) for k, v in m.state_dict().items())
