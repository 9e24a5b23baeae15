"""GPTDatasetV1's token_ids= must be one stream (1-D): a (rows, n) array used to be flattened
into one stream, its windows straddling the rows."""

import re

import numpy as np
import pytest

from npattn import GPTDatasetV1
from npattn.errors import ShapeError

MIXED = [[np.uint64(5), np.int64(3), 4, 6], [1, 2, 7, 8]]  # NumPy makes these float64: read as the ints given
HUGE = [[2**62, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("ids", [np.arange(20).reshape(4, 5), [[1, 2, 3], [4, 5, 6]], np.int64(7), MIXED, HUGE])
def test_token_ids_not_1d_are_refused_naming_the_shape(ids):
    shape = re.escape(str(np.shape(ids)))
    with pytest.raises(ShapeError, match=rf"token_ids must be 1-D .*got shape {shape}"):
        GPTDatasetV1(None, None, 3, 3, token_ids=ids)


def test_1d_token_ids_still_give_the_book_windows():
    ds = GPTDatasetV1(None, None, 3, 3, token_ids=np.arange(20))
    assert len(ds) == 6
    assert ds[1][0].tolist() == [3, 4, 5] and ds[1][1].tolist() == [4, 5, 6]
