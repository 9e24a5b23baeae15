"""TorchGenerator.bernoulli takes p as a 0-d array, the number it holds (it said "p must be a finite
number, got array(0.3)"), with torch's draws."""

import numpy as np

import npattn


def test_a_zero_d_p_is_its_number():
    same = npattn.TorchGenerator(1).bernoulli((64,), 0.3)
    assert np.array_equal(npattn.TorchGenerator(1).bernoulli((64,), np.array(0.3)), same)
    assert np.array_equal(npattn.TorchGenerator(1).bernoulli((64,), np.float32(0.3).astype(np.float64)), same)
