"""An update that makes float16 weights non-finite says what float16 does (its range, and Adam's eps
rounding to 0) whichever the optimizer (it spoke of Adam's eps under SGD)."""

import numpy as np
import pytest

import npattn
from npattn.errors import TrainingError
from npattn.optim import SGD


def _run(dtype):
    layer = npattn.Linear(4, 4, dtype=dtype, rng=0)
    x = np.full((2, 4), 100, dtype)
    criterion = npattn.nn.losses.MSELoss()
    npattn.fit(layer, SGD(layer.parameters(), lr=1e4 if dtype == np.float16 else 1e300), criterion,
               lambda step: (x, np.zeros((2, 4), dtype)), 3)  # fmt: skip


def test_float16_names_its_range():
    with np.errstate(over="ignore"), pytest.raises(TrainingError, match="float16 holds no more than 65504"):
        _run(np.float16)
