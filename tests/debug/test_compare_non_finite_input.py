"""``compare`` on an x holding NaN or inf said two identical modules diverge at every stage ("the
two implementations were not given the same input"); it is refused, as check_rows and diagnose
refuse it."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_x_is_refused(bad):
    a = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    b = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    x = npattn.book_inputs().astype(np.float64)
    x[0, 0] = bad
    with pytest.raises(ConfigError, match=r"^x holds NaN or inf \(1 of 18 entries non-finite\): expected finite"):
        npattn.compare(a, b, x)


def test_a_finite_x_compares_as_before():
    a = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    b = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    assert npattn.compare(a, b, npattn.book_inputs().astype(np.float64)).first_divergence is None
