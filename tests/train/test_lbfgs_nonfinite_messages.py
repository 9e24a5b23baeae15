"""fit_lbfgs names a NaN or inf input up front, and never advises a learning rate it does not have.

A NaN in ``x`` used to give "the loss is nan ... try a smaller learning rate": L-BFGS has no
learning rate, and the cause was the input. ``x`` and ``target`` are now checked before the first
evaluation (ConfigError naming which and how many), and a loss that turns non-finite later says
L-BFGS has no learning rate.
"""

import re

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, TrainingError
from npattn.train.tasks import TeacherStudent


@pytest.mark.parametrize("which", ["x", "target"])
def test_a_nan_or_inf_input_is_refused_before_any_evaluation(which):
    task = TeacherStudent(seed=3)
    model = task.make_model()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    x, y = task.batch(0, size=4)
    (x if which == "x" else y).reshape(-1)[:2] = [np.nan, np.inf]
    size = (x if which == "x" else y).size
    with pytest.raises(ConfigError, match=re.escape(f"fit_lbfgs: {which} holds 2 NaN or inf values (of {size}")):
        npattn.fit_lbfgs(model, task.criterion, x, y)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_a_loss_that_overflows_does_not_mention_a_learning_rate():
    task = TeacherStudent(seed=3)
    model = task.make_model()
    x, y = task.batch(0, size=4)
    model.W_value.data[...] = 1e200
    with pytest.raises(TrainingError) as info, np.errstate(all="ignore"):
        npattn.fit_lbfgs(model, task.criterion, x, y)
    assert "L-BFGS has no learning rate" in str(info.value) and "smaller learning rate" not in str(info.value)
