"""train_task(task="lm") points to run_lm and npattn train --task lm (it said "unknown task")."""

import pytest

import npattn
from npattn.errors import ConfigError


def test_lm_task_points_to_run_lm():
    with pytest.raises(ConfigError, match=r"npattn.run_lm\(settings\) or npattn train --task lm"):
        npattn.train_task(task="lm", steps=1)
    with pytest.raises(ConfigError, match="unknown task 'nope'"):
        npattn.train_task(task="nope", steps=1)
