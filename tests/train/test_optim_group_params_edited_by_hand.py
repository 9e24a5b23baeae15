"""A group's 'params' edited by hand into something ``step`` refuses (a single Parameter, nested
lists, a dict, one Parameter twice) is refused by every method that reads the groups, with step's
words: zero_grad raised Python's TypeError or AttributeError, and state_dict() returned a state
that dropped other parameters' Adam moments (so a saved run silently restarted them)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError

EDITS = {
    "a single Parameter": (lambda P: P[0], r"'params' is a single Parameter, expected a list of them: assign \[p\]"),
    "nested lists": (lambda P: [P[:2], P[2]], r"can only optimize npattn.Parameter, got list"),
    "a dict": (lambda P: {0: P[0], 1: P[1]}, r"'params' must be an iterable of Parameters, got dict"),
    "one twice": (lambda P: [P[0], P[1], P[0]], r"the same Parameter is listed twice in one group"),
}


def _stepped():
    P = [npattn.Parameter(np.ones(3)) for _ in range(3)]
    opt = npattn.optim.Adam(P, lr=0.1)
    for p in P:
        p.grad = np.ones(3)
    opt.step()
    return P, opt


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("method", ["step", "zero_grad", "state_dict", "load_state_dict", "add_param_group"])
def test_every_method_refuses_the_edit_and_changes_nothing(edit, method):
    P, opt = _stepped()
    saved = opt.state_dict()
    before = [(p.data.copy(), p.grad.copy()) for p in P]
    opt.param_groups[0]["params"] = EDITS[edit][0](P)
    args = {"load_state_dict": (saved,), "add_param_group": ({"params": [npattn.Parameter(np.ones(2))]},)}
    with pytest.raises(ConfigError, match=EDITS[edit][1]):
        getattr(opt, method)(*args.get(method, ()))
    assert all(np.array_equal(p.data, d) and np.array_equal(p.grad, g) for p, (d, g) in zip(P, before))
    opt.param_groups[0]["params"] = P
    assert len(opt.param_groups) == 1 and len(opt.state_dict()["state"]) == 3


def test_fit_names_the_edited_group_before_training():
    model = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    opt = npattn.optim.SGD(model.parameters(), lr=0.1)
    opt.param_groups[0]["params"] = model.W_query
    x, y = np.ones((2, 3)), np.zeros((2, 2))
    with pytest.raises(ConfigError, match=r"fit: SGD: parameter group 0: 'params' is a single Parameter"):
        npattn.fit(model, opt, npattn.MSELoss(), lambda step: (x, y), steps=1)


def test_an_emptied_group_is_still_saved_and_zeroed_as_before():
    _, opt = _stepped()
    opt.add_param_group({"params": [npattn.Parameter(np.ones(2))]})
    opt.param_groups[1]["params"] = []  # its parameter frozen by removing it
    opt.zero_grad()
    assert opt.state_dict()["param_groups"][1]["params"] == []
    with pytest.raises(ConfigError, match="a parameter group has no parameters"):
        opt.step()  # refused by step, as it was
