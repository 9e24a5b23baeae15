"""Optimizer buffers are refused unless they are floats at least as wide as their parameter.

A bool, integer or narrower float ``exp_avg``/``momentum_buffer`` would be converted silently (a
bool exp_avg becomes 1.0 everywhere; a float16 one loses digits, so a resumed run differs from an
uninterrupted one). PyTorch casts state to the parameter's dtype on load, so a wider float is
still accepted and cast. A refused load changes nothing.
"""

import copy
import re

import numpy as np
import pytest

import npattn
from npattn.errors import StateDictError
from npattn.optim import SGD, Adam, AdamW


def _stepped(opt_class, dtype, **kwargs):
    p = npattn.Parameter(np.linspace(-1.0, 1.0, 6, dtype=dtype).reshape(2, 3))
    opt = opt_class([p], lr=0.1, **kwargs)
    p.grad = np.full(p.shape, 0.5, dtype=dtype)
    opt.step()
    return p, opt


@pytest.mark.parametrize(
    "opt_class,kwargs,buffer",
    [(Adam, {}, "exp_avg"), (AdamW, {}, "exp_avg_sq"), (SGD, {"momentum": 0.9}, "momentum_buffer")],
)
@pytest.mark.parametrize(
    "param_dtype,edit,got",
    [
        (np.float64, lambda a: a > 0, "bool"),
        (np.float64, lambda a: a.astype(np.int64), "int64"),
        (np.float32, lambda a: a.astype(np.int32), "int32"),
        (np.float64, lambda a: a.astype(np.float16), "float16"),
        (np.float64, lambda a: a.astype(np.float32), "float32"),
        (np.float32, lambda a: a.astype(np.float16), "float16"),
    ],
)
def test_a_buffer_of_another_kind_or_narrower_dtype_is_refused(opt_class, kwargs, buffer, param_dtype, edit, got):
    _, opt = _stepped(opt_class, param_dtype, **kwargs)
    sd = opt.state_dict()
    sd["state"][0][buffer] = edit(sd["state"][0][buffer])
    before = copy.deepcopy(opt.state_dict())
    expected = np.dtype(param_dtype).name
    message = f"state of parameter 0: {buffer!r} has dtype {got}, expected {expected} (the parameter's dtype"
    with pytest.raises(StateDictError, match=re.escape(message)):
        opt.load_state_dict(sd)
    after = opt.state_dict()
    for name, value in before["state"][0].items():
        np.testing.assert_array_equal(after["state"][0][name], value)
        if isinstance(value, np.ndarray):
            assert after["state"][0][name].dtype == value.dtype


def test_a_wider_float_is_cast_to_the_parameters_dtype():
    p, opt = _stepped(Adam, np.float32)
    sd = opt.state_dict()
    wide = {k: v.astype(np.float64) if isinstance(v, np.ndarray) else v for k, v in sd["state"][0].items()}
    sd["state"][0] = wide
    opt.load_state_dict(sd)
    assert all(v.dtype == np.float32 for v in opt.state[p].values() if isinstance(v, np.ndarray))


def test_the_same_dtype_and_a_torch_tensor_still_load():
    torch = pytest.importorskip("torch")
    p, opt = _stepped(Adam, np.float32)
    sd = opt.state_dict()
    sd["state"][0] = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in sd["state"][0].items()}
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype == np.float32
