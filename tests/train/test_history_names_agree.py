"""A history whose entries name other parameters than the model's (a distance list removed from
``moved_since_log``, an extra one added) was refused by ``fit`` with the lengths it found, not
naming the parameter; the message now names what is missing or extra."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.train.command import train_task


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda sd: sd["moved_since_log"].pop("W_key"), r"history\.moved_since_log must hold .*; missing \['W_key'\]$"),
        (lambda sd: sd["moved_from_start"].update(W_extra=np.array([0.1, 0.2])), r"; extra \['W_extra'\]$"),
        (lambda sd: sd["last_log"].pop("W_value"), r"history\.last_log must hold every .*; missing \['W_value'\]$"),
    ],
    ids=["distance removed", "distance added", "weights removed"],
)
def test_a_history_naming_other_parameters_is_refused_naming_them(edit, named):
    model, opt, history, task = train_task("teacher-student", steps=4, log_every=2)
    state = {k: (dict(v) if isinstance(v, dict) else v) for k, v in history.state_dict().items()}
    edit(state)
    edited = npattn.History.from_state_dict(state)
    with pytest.raises(ConfigError, match=named):
        npattn.fit(model, opt, task.criterion, task.batch, 6, start_step=4, history=edited, log_every=2)
