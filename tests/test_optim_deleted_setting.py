"""A setting deleted from ``param_groups`` is refused by ``step()``, not taken from the constructor.

``del opt.param_groups[0]['lr']`` used to leave step() using the constructor's lr (PyTorch raises
KeyError). step() now raises ConfigError naming the group and the setting, before any weight,
gradient or buffer changes; add_param_group still fills missing settings from the defaults.
"""

import re

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, Adam, AdamW


def _param(value: float) -> npattn.Parameter:
    p = npattn.Parameter(np.full(3, value))
    p.grad = np.full(3, 0.25)
    return p


@pytest.mark.parametrize(
    "make,key",
    [
        (lambda ps: SGD(ps, lr=0.1), "lr"),
        (lambda ps: SGD(ps, lr=0.1, momentum=0.9), "momentum"),
        (lambda ps: Adam(ps, lr=0.1), "betas"),
        (lambda ps: AdamW(ps, lr=0.1), "weight_decay"),
    ],
)
def test_step_refuses_a_deleted_setting_and_changes_nothing(make, key):
    first, second = _param(1.0), _param(2.0)
    opt = make([first])
    opt.add_param_group({"params": [second]})
    opt.step()  # some state to keep
    state = {p: {k: np.copy(v) for k, v in s.items()} for p, s in opt.state.items()}
    data = [first.data.copy(), second.data.copy()]
    del opt.param_groups[1][key]
    message = f"parameter group 1: the group lacks the setting(s) {key!r} (deleted: step() does not fall back"
    with pytest.raises(ConfigError, match=re.escape(message)):
        opt.step()
    np.testing.assert_array_equal(first.data, data[0])
    np.testing.assert_array_equal(second.data, data[1])
    assert {p: set(s) for p, s in opt.state.items()} == {p: set(s) for p, s in state.items()}
    for p, s in state.items():
        for k, v in s.items():
            np.testing.assert_array_equal(opt.state[p][k], v)


def test_a_setting_set_again_steps_and_add_param_group_still_fills_defaults():
    p, q = _param(1.0), _param(1.0)
    opt = SGD([p], lr=0.1)
    opt.add_param_group({"params": [q], "lr": 0.2})
    assert opt.param_groups[1]["momentum"] == 0.0
    del opt.param_groups[0]["lr"]
    opt.param_groups[0]["lr"] = 0.5
    opt.step()
    np.testing.assert_allclose(p.data, 1.0 - 0.5 * 0.25)
    np.testing.assert_allclose(q.data, 1.0 - 0.2 * 0.25)
