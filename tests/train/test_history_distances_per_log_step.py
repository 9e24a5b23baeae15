"""History.from_state_dict refuses distance lists that do not hold one distance per log step."""

import re

import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.optim import Adam


@pytest.fixture(scope="module")
def state():
    task = npattn.tasks.TeacherStudent()
    model = task.make_model()
    history = npattn.fit(model, Adam(model.parameters(), lr=0.05), task.criterion, task.batch, 3, log_every=1)
    assert history.log_steps == [1, 2, 3]
    return history.state_dict()


@pytest.mark.parametrize("entry", ["moved_from_start", "moved_since_log"])
@pytest.mark.parametrize("cut", [slice(1, None), slice(None, 0)])
def test_shorter_list_refused(state, entry, cut):
    sd = {**state, entry: dict(state[entry])}
    key = sorted(sd[entry])[-1]
    sd[entry][key] = sd[entry][key][cut]
    got = len(sd[entry][key])
    message = f"history.{entry}[{key!r}] holds {got} distances for the 3 log steps in history.log_steps"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        npattn.History.from_state_dict(sd)


def test_longer_list_refused(state):
    sd = {**state, "moved_from_start": dict(state["moved_from_start"])}
    sd["moved_from_start"]["W_query"] = [*sd["moved_from_start"]["W_query"], 0.5]
    with pytest.raises(CheckpointError, match=re.escape("['W_query'] holds 4 distances for the 3 log steps")):
        npattn.History.from_state_dict(sd)


def test_fewer_log_steps_refused(state):
    sd = {**state, "log_steps": state["log_steps"][:2]}
    with pytest.raises(CheckpointError, match="holds 3 distances for the 2 log steps"):
        npattn.History.from_state_dict(sd)


def test_matching_lists_accepted(state):
    history = npattn.History.from_state_dict(state)
    assert all(len(v) == 3 for v in history.moved_since_log.values())
