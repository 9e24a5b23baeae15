"""``Adam(model.named_parameters())``, which torch 2.x takes: the names are kept as the group's
``param_names`` and appear in ``state_dict()``; a torch optimizer's state dict built that way loads
(its ``param_names`` was refused as an unknown setting), and an npattn one loads into torch."""

import numpy as np
import pytest

from npattn.errors import ConfigError, StateDictError
from npattn.nn.layers import Linear
from npattn.optim import SGD, Adam, AdamW


def stepped(cls, layer, **kw):
    opt = cls(layer.named_parameters(), lr=0.1, **kw)
    for p in layer.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    return opt


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_named_parameters_train_as_plain_ones_and_keep_their_names(cls):
    a, b = Linear(2, 3, rng=0), Linear(2, 3, rng=0)
    named, plain = stepped(cls, a), cls(b.parameters(), lr=0.1)
    for p in b.parameters():
        p.grad = np.ones_like(p.data)
    plain.step()
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    assert named.param_groups[0]["param_names"] == ["weight", "bias"]
    sd = named.state_dict()
    assert sd["param_groups"][0]["param_names"] == ["weight", "bias"] and sd["param_groups"][0]["params"] == [0, 1]
    assert "param_names" not in plain.state_dict()["param_groups"][0]
    again = cls(Linear(2, 3, rng=0).named_parameters(), lr=0.1)
    again.load_state_dict(sd)
    assert again.state_dict()["param_groups"] == sd["param_groups"]


def test_groups_with_and_without_names_are_refused():
    layer, other = Linear(2, 3), Linear(2, 3)
    opt = Adam(layer.named_parameters())
    with pytest.raises(ConfigError, match="all optimizer param groups should be with/without names"):
        opt.add_param_group({"params": list(other.parameters())})
    with pytest.raises(ConfigError, match="Some param names are missing"):
        Adam([("w", other.weight), other.bias])
    assert len(opt.param_groups) == 1


def test_bad_param_names_in_a_state_dict_are_refused_and_nothing_changes():
    layer = Linear(2, 3)
    opt = stepped(Adam, layer)
    sd = opt.state_dict()
    before = opt.state_dict()
    for bad in (["weight"], ["weight", 3], "weight"):
        sd["param_groups"][0]["param_names"] = bad
        with pytest.raises(StateDictError, match="'param_names' must list one name"):
            opt.load_state_dict(sd)
    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    np.testing.assert_array_equal(after["state"][0]["exp_avg"], before["state"][0]["exp_avg"])


@pytest.mark.torch
def test_torch_state_dicts_with_names_load_both_ways():
    torch = pytest.importorskip("torch")
    t_layer = torch.nn.Linear(2, 3).double()
    t_opt = torch.optim.Adam(t_layer.named_parameters(), lr=0.1)
    t_layer(torch.ones(1, 2, dtype=torch.float64)).sum().backward()
    t_opt.step()
    layer = Linear(2, 3)
    opt = Adam(layer.named_parameters(), lr=0.1)
    sd = t_opt.state_dict()
    opt.load_state_dict({"state": {k: {n: (v.numpy() if n != "step" else v) for n, v in s.items()}
                                   for k, s in sd["state"].items()},
                         "param_groups": sd["param_groups"]})  # fmt: skip
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    back = torch.optim.Adam(torch.nn.Linear(2, 3).double().named_parameters(), lr=0.1)
    ours = opt.state_dict()
    back.load_state_dict({"state": {k: {n: torch.as_tensor(v) for n, v in s.items()} for k, s in ours["state"].items()},
                          "param_groups": ours["param_groups"]})  # fmt: skip
    assert back.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def test_a_plain_optimizer_takes_saved_names_as_torch_does():
    layer = Linear(2, 3)
    sd = stepped(Adam, layer).state_dict()
    plain = Adam(Linear(2, 3).parameters(), lr=0.1)
    plain.load_state_dict(sd)
    assert plain.param_groups[0]["param_names"] == ["weight", "bias"]


def test_names_must_follow_a_parameter_removed_from_its_group():
    """A parameter popped from ``params`` (a way to freeze it) with its name left in ``param_names``:
    the names would pair with other parameters in the state dict, which its own load refused."""
    layer = Linear(2, 3)
    opt = stepped(Adam, layer)
    opt.param_groups[0]["params"].pop(0)
    for call in (opt.state_dict, opt.step):
        with pytest.raises(ConfigError, match=r"'param_names' must list one name \(a str\) per parameter \(1 in"):
            call()
    opt.param_groups[0]["param_names"].pop(0)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["param_names"] == ["bias"] and sd["param_groups"][0]["params"] == [0]
    fresh = Adam([("bias", Linear(2, 3).bias)], lr=0.1)
    fresh.load_state_dict(sd)
    opt.param_groups[0]["param_names"] = "b"
    with pytest.raises(ConfigError, match="got 'b'"):
        opt.state_dict()
