"""A resume without ``--steps`` past the default says that the default is what it compared.

``npattn train --resume run.npz`` on a 400-step run used to say "steps=300 is below the
checkpoint's step count 400", a number the user never gave. ``--steps`` stays the total to reach,
300 when not given, also on resume (as a fresh run); the message now says so and what to give.
"""

import re

import pytest

import npattn
from npattn.cli.main import main
from npattn.errors import ConfigError

MESSAGE = (
    "steps=300 is below the checkpoint's step count 301: steps (--steps) is the total to reach, 300 when not "
    "given, also on resume; give at least 301"
)


@pytest.fixture(scope="module")
def run_301(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "run.npz"
    npattn.train_task("teacher-student", optimizer="sgd", steps=301, save=str(path))
    return str(path)


def test_train_task_says_the_default_steps(run_301):
    with pytest.raises(ConfigError, match=re.escape(MESSAGE)):
        npattn.train_task(resume=run_301)


def test_the_command_says_the_default_steps(run_301, capsys):
    assert main(["train", "--resume", run_301]) == 2
    assert MESSAGE in capsys.readouterr().err
