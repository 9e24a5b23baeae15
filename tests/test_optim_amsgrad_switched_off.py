"""amsgrad switched off mid-run: PyTorch keeps 'max_exp_avg_sq' unchanged and unused; so does npattn."""

import math

import numpy as np
import pytest

import npattn
from npattn.optim import Adam, AdamW


def _run(make, switch_at=2, steps=5, back_on_at=None):
    """Steps with grads 1, -2, 3, ... on p = [1, 2, 3], amsgrad on until ``switch_at``."""
    p, o = make()
    for t in range(steps):
        if t == switch_at:
            o.param_groups[0]["amsgrad"] = False
        if t == back_on_at:
            o.param_groups[0]["amsgrad"] = True
        p.grad = np.array([1.0, -2.0, 0.5]) * (t + 1) * (-1) ** t
        o.step()
    return p, o


def _np(cls=Adam):
    def make():
        p = npattn.Parameter(np.array([1.0, 2.0, 3.0]))
        return p, cls([p], lr=0.1, amsgrad=True)

    return make


def test_switched_off_matches_a_hand_computation():
    p, o = _run(_np(), switch_at=2, steps=4)
    theta, m, v, v_max = np.array([1.0, 2.0, 3.0]), 0.0, 0.0, 0.0
    for t in range(1, 5):
        g = np.array([1.0, -2.0, 0.5]) * t * (-1) ** (t - 1)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        if t <= 2:
            v_max = np.maximum(v_max, v)
        used = v_max if t <= 2 else v
        theta = theta - 0.1 / (1 - 0.9**t) * m / (np.sqrt(used) / math.sqrt(1 - 0.999**t) + 1e-8)
    np.testing.assert_allclose(p.data, theta, rtol=1e-13)
    state = o.state[p]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    np.testing.assert_allclose(state["max_exp_avg_sq"], v_max, rtol=1e-13)  # kept as it was at step 2


@pytest.mark.parametrize("back_on_at", [None, 4])
@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_switched_off_matches_torch(cls, back_on_at):
    torch = pytest.importorskip("torch")

    def make_torch():
        p = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
        return p, getattr(torch.optim, cls)([p], lr=0.1, amsgrad=True)

    tp, to = make_torch()
    for t in range(6):
        if t == 2:
            to.param_groups[0]["amsgrad"] = False
        if t == back_on_at:
            to.param_groups[0]["amsgrad"] = True
        tp.grad = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) * (t + 1) * (-1) ** t
        to.step()
    p, o = _run(_np(getattr(npattn.optim, cls)), steps=6, back_on_at=back_on_at)
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-14, atol=0)
    for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        np.testing.assert_allclose(o.state[p][name], to.state[tp][name].numpy(), rtol=1e-14, atol=0)


def test_switched_off_state_dict_round_trip():
    p, o = _run(_np(), steps=3)
    sd = o.state_dict()
    assert "max_exp_avg_sq" in sd["state"][0] and sd["param_groups"][0]["amsgrad"] is False
    q = npattn.Parameter(np.array([1.0, 2.0, 3.0]))
    o2 = Adam([q], lr=0.1, amsgrad=True)
    o2.load_state_dict(sd)
    q.data[...] = p.data
    for opt, param in ((o, p), (o2, q)):
        param.grad = np.array([0.3, 0.2, -0.1])
        opt.step()
    np.testing.assert_array_equal(q.data, p.data)
    np.testing.assert_array_equal(o2.state[q]["max_exp_avg_sq"], o.state[p]["max_exp_avg_sq"])


def test_switched_off_npattn_save_round_trip(tmp_path):
    p, o = _run(_np(AdamW), steps=3)
    npattn.save(o, tmp_path / "o.npz")
    q = npattn.Parameter(p.data.copy())
    o2 = AdamW([q], lr=0.1)
    o2.load_state_dict(npattn.load(tmp_path / "o.npz"))
    assert o2.param_groups[0]["amsgrad"] is False
    np.testing.assert_array_equal(o2.state[q]["max_exp_avg_sq"], o.state[p]["max_exp_avg_sq"])


def test_switched_on_after_steps_without_it_still_refused():
    p = npattn.Parameter(np.ones(3))
    o = Adam([p], lr=0.1)
    p.grad = np.ones(3)
    o.step()
    o.param_groups[0]["amsgrad"] = True
    with pytest.raises(npattn.errors.StateDictError, match="amsgrad was switched on"):
        o.step()
