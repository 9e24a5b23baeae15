"""A task's batch(step) takes a step count, not a bool or a float; seeds are integers in [0, 2**32)
for the tasks and for run_lm alike, whatever NumPy integer type holds them."""

import re

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.train.lm_run import LMSettings
from npattn.train.tasks import SelectiveCopy, TeacherStudent


@pytest.mark.parametrize("task", [SelectiveCopy, TeacherStudent])
@pytest.mark.parametrize(
    "step,message",
    [
        (True, "batch: step must be an integer >= 0, got True (bool)"),
        (-1, "batch: step must be an integer >= 0, got -1"),
        (1.5, "batch: step must be an integer >= 0, got 1.5 (float)"),
        (np.float64(2.0), "batch: step must be an integer >= 0, got"),
    ],
)
def test_batch_refuses_a_step_that_is_not_a_count(task, step, message):
    with pytest.raises(ConfigError, match=re.escape(f"{task.__name__}.{message}")):
        task(seed=3).batch(step)


def test_batch_sizes_are_checked_and_numpy_steps_accepted():
    task = SelectiveCopy(seed=3)
    np.testing.assert_array_equal(task.batch(np.int64(4))[0], task.batch(4)[0])
    assert task.batch(1, size=3)[0].shape == (3, 6, 6)
    with pytest.raises(ConfigError, match=re.escape("SelectiveCopy.batch: size must be a positive integer, got 0")):
        task.batch(1, size=0)
    with pytest.raises(ConfigError, match=re.escape("SelectiveCopy.eval_batch: size must be a positive integer")):
        task.eval_batch(-1)


@pytest.mark.parametrize("kind", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_every_numpy_integer_seed_in_range_is_a_seed(kind):
    from npattn._checks import check_seed

    assert check_seed(kind(5)) == 5 and TeacherStudent(seed=kind(5)).seed == 5
    assert LMSettings(seed=kind(5)).seed == 5


@pytest.mark.parametrize("seed", [2**32, -1, True, np.bool_(True), 1.0, "1"])
def test_run_lm_refuses_the_seeds_the_cli_refuses(seed):
    with pytest.raises(ConfigError, match=re.escape(f"seed (--seed) must be an integer in [0, 2**32), got {seed!r}")):
        LMSettings(seed=seed)
    with pytest.raises(ConfigError, match=re.escape("seed must be an integer in [0, 2**32)")):
        SelectiveCopy(seed=seed)


def test_the_largest_seed_is_accepted():
    assert LMSettings(seed=2**32 - 1).seed == 2**32 - 1 and SelectiveCopy(seed=np.uint64(2**32 - 1)).seed == 2**32 - 1
