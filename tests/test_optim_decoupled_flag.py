"""Adam and AdamW state dicts record decoupled_weight_decay, as torch 2.x's do, and a state dict
whose flag contradicts the class is refused (an AdamW run would continue with L2 decay); a group
without the flag (torch before 2.x, older npattn files) still loads into either."""

import copy

import numpy as np
import pytest

from npattn.errors import StateDictError
from npattn.nn.module import Parameter
from npattn.optim import SGD, Adam, AdamW


def _stepped(cls, **kw):
    p = Parameter(np.arange(4.0))
    opt = cls([p], lr=0.1, weight_decay=0.2, **kw)
    p.grad = np.ones(4)
    opt.step()
    return opt


def test_state_dicts_carry_torchs_flag():
    assert _stepped(AdamW).state_dict()["param_groups"][0]["decoupled_weight_decay"] is True
    assert _stepped(Adam).state_dict()["param_groups"][0]["decoupled_weight_decay"] is False
    assert "decoupled_weight_decay" not in _stepped(SGD).state_dict()["param_groups"][0]


def test_contradicting_flag_refused_and_nothing_changed():
    adam = _stepped(Adam)
    before = copy.deepcopy(adam.state_dict())
    with pytest.raises(StateDictError, match=r"=True \(an AdamW state dict\); Adam expects False"):
        adam.load_state_dict(_stepped(AdamW).state_dict())
    assert adam.state_dict()["param_groups"] == before["param_groups"]
    with pytest.raises(StateDictError, match=r"=False \(an Adam state dict\); AdamW expects True"):
        _stepped(AdamW).load_state_dict(_stepped(Adam).state_dict())


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_own_and_flagless_dicts_load(cls):
    sd = _stepped(cls).state_dict()
    cls([Parameter(np.zeros(4))]).load_state_dict(sd)
    del sd["param_groups"][0]["decoupled_weight_decay"]
    for other in (Adam, AdamW):  # no flag: nothing to contradict
        opt = other([Parameter(np.zeros(4))])
        opt.load_state_dict(copy.deepcopy(sd))
        assert opt.state_dict()["param_groups"][0]["decoupled_weight_decay"] is other.decoupled_weight_decay


def test_torch_dicts_follow_the_same_rule():
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.arange(4.0))
    for tcls, ours, other in ((torch.optim.AdamW, AdamW, Adam), (torch.optim.Adam, Adam, AdamW)):
        sd = tcls([w], lr=0.1).state_dict()
        ours([Parameter(np.zeros(4))]).load_state_dict(sd)
        with pytest.raises(StateDictError, match="decoupled_weight_decay"):
            other([Parameter(np.zeros(4))]).load_state_dict(sd)
