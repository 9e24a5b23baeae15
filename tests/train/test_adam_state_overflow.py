"""A finite gradient whose square overflows float64 (1e200) would leave inf in Adam's exp_avg_sq
(torch stores it, and those weights never move again), a state its own load_state_dict refuses:
the step is refused with a TrainingError and changes nothing; in fit too."""

import numpy as np
import pytest

import npattn
from npattn.errors import TrainingError
from npattn.optim import Adam, AdamW


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_a_step_whose_state_would_overflow_is_refused_and_changes_nothing(cls):
    p = npattn.Parameter(np.zeros(3))
    opt = cls([p], lr=0.01)
    p.grad = np.array([1e-3, 1.0, -1e-3])
    opt.step()
    before = (p.data.copy(), opt.state_dict())
    p.grad = np.array([1e200, 1.0, -1e200])
    with pytest.raises(TrainingError, match=r"'exp_avg_sq' non-finite: the square of a gradient of up to 1e\+200"):
        opt.step()
    np.testing.assert_array_equal(p.data, before[0])
    after = opt.state_dict()["state"][0]
    for key, value in before[1]["state"][0].items():
        np.testing.assert_array_equal(after[key], value)
    cls([npattn.Parameter(p.data.copy())], lr=0.01).load_state_dict(opt.state_dict())  # still loads


def test_a_nan_gradient_still_steps_as_in_torch():
    p = npattn.Parameter(np.zeros(2))
    opt = Adam([p], lr=0.01)
    p.grad = np.array([np.nan, 1.0])
    opt.step()
    assert np.isnan(p.data[0]) and np.isfinite(p.data[1])
