"""F.softmax takes PyTorch's dim= for axis= (it was Python's TypeError); both naming two axes is refused."""

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.nn import functional as F


def test_dim_is_axis():
    z = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(F.softmax(z, dim=0), F.softmax(z, axis=0))
    assert np.array_equal(F.softmax(z, axis=0, dim=0), F.softmax(z, axis=0))
    with pytest.raises(ConfigError, match="name two axes"):
        F.softmax(z, axis=1, dim=0)
