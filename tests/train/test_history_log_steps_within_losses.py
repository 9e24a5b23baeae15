"""History.from_state_dict refuses log steps past the losses recorded (log_steps=[2, 400] with 4
losses used to load: the docs say it checks every entry)."""

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.optim import Adam
from npattn.train.loop import History
from npattn.train.tasks import TeacherStudent


def _state():
    task = TeacherStudent(seed=1)
    model = task.make_model()
    history = npattn.fit(model, Adam(model.parameters(), lr=0.05), task.criterion, task.batch, 4, log_every=2)
    return history.state_dict()


def test_log_step_past_the_losses_refused():
    state = _state()
    assert list(state["log_steps"]) == [2, 4]
    state["log_steps"] = np.array([2, 400])
    with pytest.raises(CheckpointError, match=r"history.log_steps holds step 400, past the 4 losses recorded"):
        History.from_state_dict(state)


def test_last_step_logged_is_accepted():
    assert History.from_state_dict(_state()).log_steps == [2, 4]
