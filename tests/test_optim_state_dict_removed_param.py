"""A parameter removed from its group mid-run: state_dict() and npattn.save leave its state out."""

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, Adam


def _stepped_then_popped(cls=Adam, **kw):
    ps = [npattn.Parameter(np.full((2, 2), float(i + 1))) for i in range(3)]
    o = cls(ps, lr=0.1, **kw)
    for t in range(2):
        for i, p in enumerate(ps):
            p.grad = np.full((2, 2), (i + 1.0) * (t + 1))
        o.step()
    o.param_groups[0]["params"].pop(0)
    return ps, o


@pytest.mark.parametrize(("cls", "kw"), [(Adam, {}), (SGD, {"momentum": 0.9})])
def test_state_dict_leaves_out_a_parameter_in_no_group(cls, kw):
    ps, o = _stepped_then_popped(cls, **kw)
    sd = o.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert sorted(sd["state"]) == [0, 1]
    for index, p in ((0, ps[1]), (1, ps[2])):  # renumbered: the state of the parameters still listed
        for name, value in o.state[p].items():
            np.testing.assert_array_equal(sd["state"][index][name], value)
    assert ps[0] in o.state  # the removed parameter's buffers stay in memory, as in torch
    fresh = [npattn.Parameter(p.data.copy()) for p in ps[1:]]
    o2 = cls(fresh, lr=0.1, **kw)
    o2.load_state_dict(sd)
    for opt, params in ((o, ps[1:]), (o2, fresh)):
        for p in params:
            p.grad = np.full((2, 2), 0.5)
        opt.step()
    for p, q in zip(ps[1:], fresh):
        np.testing.assert_array_equal(p.data, q.data)


def test_npattn_save_after_removing_a_parameter(tmp_path):
    ps, o = _stepped_then_popped(Adam)
    npattn.save(o, tmp_path / "o.npz")
    fresh = [npattn.Parameter(p.data.copy()) for p in ps[1:]]
    o2 = Adam(fresh, lr=0.1)
    o2.load_state_dict(npattn.load(tmp_path / "o.npz"))
    for p, q in zip(ps[1:], fresh):
        np.testing.assert_array_equal(o2.state[q]["exp_avg"], o.state[p]["exp_avg"])
        assert o2.state[q]["step"] == 2


def test_torch_agrees_on_the_remaining_state():
    torch = pytest.importorskip("torch")
    _, o = _stepped_then_popped(Adam)
    tp = [torch.nn.Parameter(torch.full((2, 2), float(i + 1), dtype=torch.float64)) for i in range(3)]
    to = torch.optim.Adam(tp, lr=0.1)
    for t in range(2):
        for i, p in enumerate(tp):
            p.grad = torch.full((2, 2), (i + 1.0) * (t + 1), dtype=torch.float64)
        to.step()
    to.param_groups[0]["params"].pop(0)
    sd = o.state_dict()
    for index, p in ((0, tp[1]), (1, tp[2])):
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(sd["state"][index][name], to.state[p][name].numpy(), rtol=1e-14, atol=0)
