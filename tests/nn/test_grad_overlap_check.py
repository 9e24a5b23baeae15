"""The check for a .grad whose entries share memory costs a stride test, not a pass over its entries:
a (2000, 1000) strided view took seconds per backward, a GPT-sized one minutes and gigabytes."""

import time

import numpy as np

from npattn._checks import overlaps_itself
from npattn._scalars import bound


def test_strided_views_are_told_apart_by_their_strides():
    start = time.monotonic()
    assert not overlaps_itself(np.zeros((2000, 2000))[:, ::2])
    assert not overlaps_itself(np.zeros((3, 50257, 384), np.float32)[..., ::2])
    assert time.monotonic() - start < 0.5
    assert overlaps_itself(np.lib.stride_tricks.as_strided(np.zeros(3), (3, 2), (8, 0)))
    assert overlaps_itself(np.lib.stride_tricks.as_strided(np.zeros(6), (3, 3), (16, 8)))
    assert not overlaps_itself(np.zeros((4, 6))[:, ::-1]) and not overlaps_itself(np.zeros((4, 6)).T[::2])


def test_advised_bounds_of_subnormal_and_huge_values_are_written_out():
    assert bound(3e-320, below=True) == repr(3e-320)  # was a ZeroDivisionError
    assert bound(1.797e308, below=False) != "inf"
