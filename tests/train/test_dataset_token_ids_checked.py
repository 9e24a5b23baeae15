"""GPTDatasetV1's token_ids= are refused unless they are integers (floats used to be truncated,
bools taken as 0/1), and a dataset given both txt and token_ids is refused (txt was ignored)."""

import numpy as np
import pytest

from npattn.errors import ConfigError, DTypeError
from npattn.train.text import GPTDatasetV1
from npattn.train.tokenizers import CharTokenizer


@pytest.mark.parametrize(
    "ids, dtype",
    [([1.7, 2.2, 3.9, 4.0], "float64"), ([True, False, True, True], "bool"), (np.array([1.0, 2.0, 3.0]), "float64")],
)
def test_non_integer_ids_refused(ids, dtype):
    with pytest.raises(DTypeError, match=f"token_ids must be integers, got dtype {dtype}"):
        GPTDatasetV1(None, None, 2, 1, token_ids=ids)


def test_both_sources_refused():
    tok = CharTokenizer.train("abc abc")
    with pytest.raises(ConfigError, match="got both txt and token_ids: give one source"):
        GPTDatasetV1("abc abc", tok, 2, 1, token_ids=[1, 2, 3, 4])


def test_integer_ids_still_work():
    ds = GPTDatasetV1(None, None, 2, 1, token_ids=np.array([1, 2, 3, 4], dtype=np.uint8))
    assert ds.input_ids.tolist() == [[1, 2], [2, 3]] and ds.input_ids.dtype == np.int64
    assert len(GPTDatasetV1(None, None, 2, 1, token_ids=[])) == 0
