"""gradcheck_stage refuses names that are not distinct, non-empty strings (printing the report of
names=[1, None] was a TypeError; ['W', 'W'] named no input in a failure), and checks two boolean
inputs as float64 numbers together (each was tried beside the other's bool, refused, and called
"integer")."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.nn import functional as F

RNG = np.random.default_rng(0)
INPUTS = [RNG.standard_normal((5, 3)), RNG.standard_normal((6, 3))]


@pytest.mark.parametrize("names", [[1, None], [b"q", "k"], ["W", "W"], ["", "k"]])
def test_names_must_be_distinct_non_empty_strings(names):
    with pytest.raises(ConfigError, match="names must be distinct, non-empty strings"):
        npattn.gradcheck_stage(F.scores_forward, F.scores_backward, INPUTS, names=names)


def test_two_boolean_inputs_are_checked_as_numbers():
    report = npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [RNG.random((5, 3)) > 0.5,
                                                                          RNG.random((6, 3)) > 0.5])  # fmt: skip
    assert report.passed and [c.name for c in report.checks] == ["input0", "input1"]
