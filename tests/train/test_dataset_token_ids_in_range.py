"""GPTDatasetV1's token_ids= must lie in [0, 2**63): a uint64 id past int64 used to wrap to a
negative one without a word, and negative ids were accepted."""

import re

import numpy as np
import pytest

from npattn.errors import ConfigError, DTypeError
from npattn.train.text import GPTDatasetV1


@pytest.mark.parametrize(
    ("ids", "value", "position"),
    [
        (np.full(10, 2**63, np.uint64), 2**63, 0),
        ([-1] * 10, -1, 0),
        (np.array([5, 6, -3, 7, 8, 9]), -3, 2),
        ([3, -1, 2**63, 4, 5], -1, 1),  # NumPy makes this float64: the ints given are judged, not refused as floats
        ([1, 2, 3, 4, 2**64], 2**64, 4),  # NumPy makes this an object array
        (np.array([1, 2, 2**64 - 1], dtype=np.uint64), 2**64 - 1, 2),
    ],
)
def test_ids_outside_int64_or_negative_refused(ids, value, position):
    message = f"token_ids must lie in [0, 2**63) (token ids, stored as int64), got {value} at position {position}"
    with pytest.raises(ConfigError, match=re.escape(message)):
        GPTDatasetV1(None, None, 4, 4, token_ids=ids)


def test_ids_in_range_kept_exactly():
    top = 2**63 - 1
    ds = GPTDatasetV1(None, None, 2, 1, token_ids=np.array([0, top, 1, top], dtype=np.uint64))
    assert ds.token_ids.dtype == np.int64 and ds.token_ids.tolist() == [0, top, 1, top]
    assert GPTDatasetV1(None, None, 2, 1, token_ids=[np.uint64(5), -0, 3, 4]).token_ids.tolist() == [5, 0, 3, 4]
    assert GPTDatasetV1(None, None, 2, 1, token_ids=np.array([1, 2, 3], dtype=object)).token_ids.tolist() == [1, 2, 3]


@pytest.mark.parametrize("ids", [[1.5, 2**63], [True, 2**64], np.array([1, "a"], dtype=object), (i for i in range(3))])
def test_non_integers_still_a_dtype_error(ids):
    with pytest.raises(DTypeError, match="token_ids must be integers"):
        GPTDatasetV1(None, None, 2, 1, token_ids=ids)
