"""split_train_val takes a NumPy real scalar (or 0-d array) as the number it holds, as the other
settings do, and still refuses what is not a real number in (0, 1)."""

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.train import split_train_val

TEXT = "abcdefghij" * 600


@pytest.mark.parametrize("ratio", [np.float32(0.75), np.float64(0.9), np.array(0.5), np.float16(0.25)])
def test_numpy_scalars_are_numbers(ratio):
    train, val = split_train_val(TEXT, ratio)
    assert len(train) == int(float(ratio) * len(TEXT)) and train + val == TEXT


def test_float32_is_taken_as_the_float_it_holds():
    assert len(split_train_val(TEXT, np.float32(0.9))[0]) == int(float(np.float32(0.9)) * 6000) == 5399


@pytest.mark.parametrize("ratio", [True, np.bool_(True), 1, np.int64(0), np.float32(1.5), np.nan, "0.9", 0.5j,
                                   np.zeros(2)])
def test_other_values_are_refused(ratio):
    with pytest.raises(ConfigError, match=r"train_ratio must lie in \(0, 1\), got"):
        split_train_val(TEXT, ratio)
