"""The debugging tools judge what they are given: an output check_rows_of cannot check is refused,
token names must fit the rows, and a correct float32 output passes within float32's documented
bound while a real mistake still fails."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


def _mha() -> npattn.MultiHeadAttention:
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1)


@pytest.mark.parametrize("shift", [None, 1.0])
def test_check_rows_of_multihead_refuses_an_output_it_cannot_check(shift):
    m, x = _mha(), npattn.book_batch()
    out = np.zeros_like(m(x)) if shift is None else m(x) + shift
    with pytest.raises(ConfigError, match=r"merged_heads.*pass a Trace of it \(npattn.trace\(module, x\)\).*ndarray"):
        npattn.check_rows_of(m, x, out)


def test_check_rows_of_multihead_still_checks_a_trace_and_its_own_run():
    m, x = _mha(), npattn.book_batch()
    assert npattn.check_rows_of(m, x).passed
    assert npattn.check_rows_of(m, x, npattn.trace(m, x)).passed


def test_check_rows_of_the_other_classes_still_judges_the_given_output():
    m, x = npattn.CausalAttention(3, 2, 6, 0.0, rng=1), npattn.book_batch()
    assert npattn.check_rows_of(m, x, m(x)).passed
    assert not npattn.check_rows_of(m, x, m(x) + 1.0).passed
