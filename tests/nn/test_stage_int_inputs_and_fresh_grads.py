"""Stage functions take integer arrays as float64 (int8 products would wrap around), masks keep
their own dtype rule; add_backward returns new arrays, so a residual's ``dx += ...`` changes
neither the caller's upstream gradient nor the branch's."""

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64])
def test_integer_stage_inputs_are_float64(dtype):
    a = (np.arange(6).reshape(3, 2) * 20).astype(dtype)
    scores, _ = F.scores_forward(a, a)
    assert scores.dtype == np.float64 and scores[1, 1] == 5200.0
    out, _ = F.project_forward(a, a.T)
    np.testing.assert_array_equal(out, a.astype(np.float64) @ a.T.astype(np.float64))


def test_an_integer_mask_is_still_refused_by_its_own_rule():
    w = np.full((2, 2), 0.5)
    with pytest.raises(npattn.DTypeError, match=r"keep must be a bool array .* got dtype int64"):
        F.dropout_forward(w, np.ones((2, 2), np.int64), 0.5)


def test_add_backward_returns_new_arrays():
    x = np.array([[0.5, -1.0]])
    h, gelu_cache = F.gelu_forward(x)
    y, add_cache = F.add_forward(x, h)
    G = np.ones_like(y)
    dx, dh = F.add_backward(G, add_cache)
    assert not np.shares_memory(dx, G) and not np.shares_memory(dh, G) and not np.shares_memory(dx, dh)
    dx += F.gelu_backward(dh, gelu_cache)[0]  # a hand-written residual
    np.testing.assert_array_equal(G, np.ones_like(y))
    np.testing.assert_array_equal(dh, np.ones_like(y))
