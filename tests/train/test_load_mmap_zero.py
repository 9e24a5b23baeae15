"""npattn.load(path, mmap=0) is mmap=False, as the optimizers' switches take 0 (it was refused with
"leave it out or pass False")."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def test_mmap_zero_loads_and_a_true_one_is_refused(tmp_path):
    path = str(tmp_path / "m.npz")
    npattn.save({"a": np.arange(3.0)}, path)
    for off in (0, np.int64(0), False, np.False_):
        assert np.array_equal(npattn.load(path, mmap=off)["a"], np.arange(3.0))
    for on in (1, True):
        with pytest.raises(ConfigError, match="is not supported"):
            npattn.load(path, mmap=on)
