"""A NumPy masked array with masked entries is refused wherever npattn takes an array (its mask
would be ignored and the values under it used); one with nothing masked is taken as its data."""

import numpy as np
import pytest

import npattn
import npattn.nn.functional as F
from npattn.errors import DTypeError


def _x(masked: bool) -> np.ma.MaskedArray:
    x = np.asarray(npattn.book_inputs(), dtype=np.float32)
    mask = np.zeros(x.shape, dtype=bool)
    mask[1, 2] = masked
    return np.ma.masked_array(x, mask=mask)


def test_a_module_refuses_masked_entries():
    m = npattn.SelfAttention_v1(3, 2, rng=123)
    with pytest.raises(DTypeError, match=r"x: a masked array with 1 of 18 entries masked"):
        m(_x(True))


def test_a_stage_refuses_masked_entries():
    x = _x(True)
    with pytest.raises(DTypeError, match=r"softmax.*a masked array with 1 of 18 entries masked"):
        F.softmax(x)


def test_nothing_masked_is_the_data():
    m = npattn.SelfAttention_v1(3, 2, rng=123)
    x = _x(False)
    np.testing.assert_array_equal(m(x), m(np.asarray(x)))
