"""check_shapes and predict_shapes_for refuse what is not an array where an array is expected (a
str, None, an object, ragged lists), naming the expected shape and what was given: a str used to be
read as a 0-d output and reported as a shape MISMATCH. predict_shapes' dropout must be a bool."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, DTypeError


@pytest.mark.parametrize(
    ("actual", "given"),
    [("abc", r"a str \('abc'\)"), (None, "None"), (object(), "an object"), ([[1.0], [2.0, 3.0]], "a list")],
)
def test_check_shapes_refuses_a_bare_non_array(actual, given):
    prediction = npattn.predict_shapes(6, 3, 2)
    expected = rf"check_shapes: context_vec: expected an array of shape \(6, 2\), got {given}"
    with pytest.raises(DTypeError, match=expected):
        npattn.check_shapes(prediction, actual)


def test_check_shapes_refuses_a_mapping_value_that_is_neither_array_nor_shape():
    prediction = npattn.predict_shapes(6, 3, 2)
    with pytest.raises(DTypeError, match=r"check_shapes: queries: expected an array of shape \(6, 2\).*got None"):
        npattn.check_shapes(prediction, {"queries": None})
    with pytest.raises(DTypeError, match=r"queries: expected a shape \(a tuple of ints >= 0\).*got \('6', 2\)"):
        npattn.check_shapes(prediction, {"queries": ("6", 2)})
    # arrays, nested lists of numbers and shape tuples are still read
    assert npattn.check_shapes(prediction, {"queries": (6, 2), "keys": [[0.0] * 2] * 6}).passed
    assert npattn.check_shapes(prediction, np.zeros((6, 2))).passed
    assert not npattn.check_shapes(prediction, {"queries": (6, 3)}).passed


def test_predict_shapes_for_refuses_a_non_array_x_and_predict_shapes_a_non_bool_dropout():
    m = npattn.SelfAttention_v1(3, 2, rng=1)
    with pytest.raises(DTypeError, match=r"predict_shapes_for: x: expected an array of shape \(n, d_in\).*got a str"):
        npattn.predict_shapes_for(m, "abc")
    assert npattn.predict_shapes_for(m, (6, 3)).output_shape == (6, 2)
    with pytest.raises(ConfigError, match=r"dropout: expected True or False, got 'no' \(str\)"):
        npattn.predict_shapes(6, 3, 2, kind="causal", dropout="no")
    assert npattn.predict_shapes(6, 3, 2, kind="causal", dropout=np.bool_(True))["dropped_weights"] == (6, 6)
