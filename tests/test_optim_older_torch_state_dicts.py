"""A state dict written by an older PyTorch, whose groups lack the settings added since (Adam's
``amsgrad`` and ``maximize``, SGD's ``nesterov`` and ``maximize``), loads as torch loads it: those
settings are False (torch's ``__setstate__`` fills them in). It was refused ("the state dict lacks
the setting(s) 'maximize'"). Any other missing setting is still refused."""

import numpy as np
import pytest

from npattn.errors import StateDictError
from npattn.nn.module import Parameter
from npattn.optim import SGD, Adam, AdamW

LATER = {Adam: ("amsgrad", "maximize"), AdamW: ("amsgrad", "maximize"), SGD: ("nesterov", "maximize")}


def _stepped(cls, **settings):
    p = Parameter(np.array([1.0, -2.0, 3.0]))
    opt = cls([p], lr=0.1, **settings)
    for _ in range(2):
        p.grad = p.data * 0.5
        opt.step()
    return p, opt


@pytest.mark.parametrize("cls", list(LATER), ids=lambda c: c.__name__)
def test_settings_a_later_torch_added_load_as_false(cls):
    extra = {"momentum": 0.9} if cls is SGD else {}
    p, opt = _stepped(cls, **extra)
    state = opt.state_dict()
    for key in LATER[cls]:
        del state["param_groups"][0][key]
    q = Parameter(p.data.copy())
    other = cls([q], lr=0.1, maximize=True, **extra)  # the constructor's True is not what fills them
    other.load_state_dict(state)
    assert all(other.param_groups[0][key] is False for key in LATER[cls])
    p.grad, q.grad = p.data * 0.5, q.data * 0.5
    opt.step()
    other.step()
    np.testing.assert_array_equal(q.data, p.data)


@pytest.mark.parametrize("key", ["lr", "eps", "weight_decay"])
def test_any_other_missing_setting_is_refused(key):
    _, opt = _stepped(Adam)
    state = opt.state_dict()
    del state["param_groups"][0][key]
    with pytest.raises(StateDictError, match=rf"the state dict lacks the setting\(s\) '{key}'"):
        Adam([Parameter(np.zeros(3))], lr=0.1).load_state_dict(state)


def test_a_torch_state_dict_without_maximize_loads():
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64))
    theirs = torch.optim.Adam([w], lr=0.1)
    w.grad = w.detach() * 0.5
    theirs.step()
    state = theirs.state_dict()
    del state["param_groups"][0]["maximize"]
    p = Parameter(w.detach().numpy().copy())
    ours = Adam([p], lr=0.1)
    ours.load_state_dict(state)
    theirs.load_state_dict(state)  # torch takes it too
    w.grad, p.grad = w.detach() * 0.5, p.data * 0.5
    theirs.step()
    ours.step()
    np.testing.assert_allclose(p.data, w.detach().numpy(), rtol=0, atol=1e-15)
