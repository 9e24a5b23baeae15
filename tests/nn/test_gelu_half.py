"""float16 GELU is computed in float32 and rounded once, as PyTorch's half GELU: in float16,
1 + tanh(u) cancelled for negative inputs (GELU(-4) was 0 where it is -7.0e-05; up to 33% off
between -12 and 12)."""

import math

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F


def _gelu64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def test_float16_gelu_is_float16_rounding_of_the_truth():
    x = np.linspace(-12, 12, 4001).astype(np.float16)
    out = npattn.GELU()(x)
    assert out.dtype == np.float16
    truth = _gelu64(x)
    ulp = np.spacing(np.abs(truth).astype(np.float16)).astype(np.float64)  # float16's step at each value
    # plus what float32's 1 + tanh(u) may lose (eps32 of 1, times 0.5 |x|): PyTorch's half GELU too
    assert np.all(np.abs(out.astype(np.float64) - truth) <= ulp + 1.2e-7 * np.abs(x.astype(np.float64)))
    assert out[np.argmin(np.abs(x + 4))] != 0  # -7.0e-05, not 0


def test_float16_backward_keeps_its_dtype():
    x = np.array([-4.0, -1.0, 0.5, 3.0], dtype=np.float16)
    out, cache = F.gelu_forward(x)
    (dx,) = F.gelu_backward(np.ones(4, dtype=np.float16), cache)
    assert out.dtype == dx.dtype == np.float16


def test_matches_torch_half_within_one_step():
    torch = pytest.importorskip("torch")
    x = np.linspace(-12, 12, 4001).astype(np.float16)
    theirs = torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy().astype(np.float64)
    ours = npattn.GELU()(x).astype(np.float64)
    step = np.spacing(np.abs(theirs).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(ours - theirs) <= 2 * step + 1.2e-7 * np.abs(x.astype(np.float64)))


def test_float16_backward_is_computed_in_float32():
    x = np.array([-4, -3, -2.5, -1, 0.5, 2], dtype=np.float16)
    _, cache = F.gelu_forward(x)
    (dx,) = F.gelu_backward(np.ones(6, dtype=np.float16), cache)
    x64 = x.astype(np.float64)
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (x64 + 0.044715 * x64**3))
    truth = 0.5 * (1 + t) + 0.5 * x64 * (1 - t * t) * c * (1 + 3 * 0.044715 * x64 * x64)
    step = np.spacing(np.abs(truth).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(dx.astype(np.float64) - truth) <= step + 1.2e-7 * np.abs(x64))
    assert dx[0] != 0  # -3.35e-04, not 0
