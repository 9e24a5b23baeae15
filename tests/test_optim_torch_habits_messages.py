"""Torch habits at the optimizer's edges: a state dict from a run with an lr scheduler (its groups
carry initial_lr) loads, ``state`` keyed by strings (a JSON round trip) says the keys must be
ints, and ``model.named_parameters()`` says how to pass the parameters."""

import copy

import numpy as np
import pytest

from npattn.errors import StateDictError
from npattn.nn.module import Parameter
from npattn.optim import Adam


def _stepped():
    p = Parameter(np.arange(3.0))
    opt = Adam([p], lr=0.1)
    p.grad = np.ones(3)
    opt.step()
    return opt


def test_scheduler_initial_lr_is_accepted_and_dropped():
    sd = _stepped().state_dict()
    sd["param_groups"][0]["initial_lr"] = 0.5
    opt = Adam([Parameter(np.zeros(3))])
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.1 and "initial_lr" not in opt.param_groups[0]


def test_torch_scheduler_state_dict_loads():
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.arange(3.0))
    topt = torch.optim.Adam([w], lr=0.1)
    torch.optim.lr_scheduler.StepLR(topt, step_size=1)
    assert "initial_lr" in topt.state_dict()["param_groups"][0]
    opt = Adam([Parameter(np.zeros(3))])
    opt.load_state_dict(topt.state_dict())
    assert opt.param_groups[0]["lr"] == 0.1


def test_string_state_keys_say_they_must_be_ints():
    sd = copy.deepcopy(_stepped().state_dict())
    sd["state"] = {"0": sd["state"][0]}
    opt = Adam([Parameter(np.zeros(3))])
    with pytest.raises(StateDictError, match=r"'state' must be keyed by int indices .*got '0' \(use 0; a JSON"):
        opt.load_state_dict(sd)
    assert opt.state == {}
