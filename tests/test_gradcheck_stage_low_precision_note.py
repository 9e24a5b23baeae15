"""``gradcheck_stage`` on float32 inputs checks float64 copies, so a backward wrong only in float32
passed with a bare PASSED; it now carries gradcheck's note that a float32-only path is not checked."""

import numpy as np

import npattn


def f_forward(x):
    return x * 2.0, (x.dtype,)


def f_backward(d, cache):
    return (d * (2.0 if cache[0] == np.float64 else 3.0),)


def test_float32_inputs_get_the_float64_copy_note():
    x = np.random.default_rng(0).standard_normal(3).astype(np.float32)
    report = npattn.gradcheck_stage(f_forward, f_backward, [x])
    assert "note: checked on float64 copies of the float32 inputs" in str(report)


def test_float64_inputs_get_no_note():
    report = npattn.gradcheck_stage(f_forward, f_backward, [np.random.default_rng(0).standard_normal(3)])
    assert "float64 copies" not in str(report)
