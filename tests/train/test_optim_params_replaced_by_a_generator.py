"""A group whose 'params' was replaced by a generator is refused by every method that reads the
groups, before anything is read: state_dict() wrote a state of no parameters (every Adam moment
dropped, without a word), and the second step found "no parameters"."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


@pytest.fixture
def stepped():
    model = npattn.SelfAttention_v1(3, 2, rng=1)
    opt = npattn.optim.Adam(model.parameters())
    model(np.ones((2, 3)))
    model.backward(np.ones((2, 2)))
    opt.step()
    return model, opt


@pytest.mark.parametrize("method", ["state_dict", "zero_grad", "step", "load_state_dict", "add_param_group"])
def test_every_method_refuses_a_generator_and_changes_nothing(stepped, method):
    model, opt = stepped
    saved = opt.state_dict()
    before = [p.data.copy() for p in model.parameters()]
    opt.param_groups[0]["params"] = (p for p in model.parameters())
    args = {"load_state_dict": (saved,), "add_param_group": ({"params": [npattn.Parameter(np.ones(2))]},)}
    with pytest.raises(ConfigError, match=rf"Adam.{method}: parameter group 0: 'params' is a generator or iterator"):
        getattr(opt, method)(*args.get(method, ()))
    opt.param_groups[0]["params"] = list(model.parameters())  # the generator was not read
    assert all(np.array_equal(p.data, b) for p, b in zip(model.parameters(), before))
    assert len(opt.param_groups) == 1 and len(opt.state_dict()["state"]) == 3
