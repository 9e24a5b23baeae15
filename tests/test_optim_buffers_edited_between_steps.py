"""Optimizer buffers edited by hand between steps (``opt.state[p]["exp_avg_sq"][...] = -1``, a bool
or int ``exp_avg`` put in its place): ``step`` used them as they were (a negative running mean of
squares made the weights NaN; an int moment trained with truncated numbers). They are refused as
``load_state_dict`` refuses them, and the failed step changes nothing."""

import numpy as np
import pytest

from npattn.errors import DTypeError, StateDictError
from npattn.nn.module import Parameter
from npattn.optim import SGD, Adam, AdamW


def stepped(cls, **kw):
    p = Parameter(np.array([[1.0, -2.0], [0.5, 3.0]]))
    p.grad = np.array([[0.1, 0.2], [-0.3, 0.4]])
    opt = cls([p], lr=0.1, **kw)
    opt.step()
    return p, opt


def snapshot(p, opt):
    return p.data.copy(), {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in opt.state[p].items()}


def assert_unchanged(p, opt, before):
    data, state = before
    np.testing.assert_array_equal(p.data, data)
    assert opt.state[p].keys() == state.keys()
    for k, v in state.items():
        np.testing.assert_array_equal(opt.state[p][k], v)


@pytest.mark.parametrize(
    "cls,kw,name", [(Adam, {}, "exp_avg_sq"), (AdamW, {}, "exp_avg_sq"), (Adam, {"amsgrad": True}, "max_exp_avg_sq")]
)
def test_a_negative_running_mean_of_squares_is_refused(cls, kw, name):
    p, opt = stepped(cls, **kw)
    for key in ("exp_avg_sq", "max_exp_avg_sq"):
        if key in opt.state[p]:
            opt.state[p][key][...] = -1.0
    before = snapshot(p, opt)
    said = rf"{cls.__name__}\.step: {cls.__name__} parameter 0 of group 0: the state '{name}' holds negative values"
    with pytest.raises(StateDictError, match=said):
        opt.step()
    assert_unchanged(p, opt, before)


@pytest.mark.parametrize("dtype", [bool, np.int64, np.complex128])
@pytest.mark.parametrize("cls,name", [(Adam, "exp_avg"), (Adam, "exp_avg_sq"), (SGD, "momentum_buffer")])
def test_a_buffer_of_another_dtype_is_refused(cls, name, dtype):
    p, opt = stepped(cls, **({"momentum": 0.9} if cls is SGD else {}))
    opt.state[p][name] = np.ones(p.shape, dtype)
    before = snapshot(p, opt)
    with pytest.raises(StateDictError, match=rf"state '{name}' has dtype {np.dtype(dtype)}, the parameter has float64"):
        opt.step()
    assert_unchanged(p, opt, before)


def test_a_nan_gradient_still_gives_nan_weights_as_in_torch():
    """Only a negative buffer raises: NaN passes through the square root quietly, as in PyTorch."""
    p, opt = stepped(Adam)
    p.grad = np.full(p.shape, np.nan)
    opt.step()
    assert np.isnan(p.data).all()


@pytest.mark.parametrize("cls", [SGD, Adam])
@pytest.mark.parametrize("to", ["float32", "float64"])
def test_a_model_converted_after_steps_trains_on_with_its_buffers_cast(cls, to):
    """``model.to(dtype)`` after steps leaves the buffers in the old dtype: step casts them to the
    parameter's (torch's own step raises; its load_state_dict casts), and the step equals a step
    from buffers converted by hand."""
    kw = {"momentum": 0.9} if cls is SGD else {}
    p, opt = stepped(cls, **kw)
    other = np.float32 if to == "float64" else np.float64
    p.data = p.data.astype(other)
    for k, v in opt.state[p].items():
        if isinstance(v, np.ndarray):
            opt.state[p][k] = v.astype(other)
    q = Parameter(p.data.astype(to))
    q.grad = np.full(p.shape, 0.5, to)
    opt.param_groups[0]["params"] = [q]
    opt.state[q] = opt.state.pop(p)
    by_hand = cls([Parameter(q.data.copy())], lr=0.1, **kw)
    (r,) = by_hand.param_groups[0]["params"]
    r.grad = q.grad.copy()
    by_hand.state[r] = {k: v.astype(to) if isinstance(v, np.ndarray) else v for k, v in opt.state[q].items()}
    opt.step()
    by_hand.step()
    np.testing.assert_array_equal(q.data, r.data)
    assert all(v.dtype == np.dtype(to) for v in opt.state[q].values() if isinstance(v, np.ndarray))


def test_a_buffer_the_new_dtype_cannot_hold_is_refused_and_nothing_changes():
    """Adam's exp_avg_sq of 1e5 cast to float16 (after model.to(float16)) would be inf: refused."""
    p = Parameter(np.ones(3))
    p.grad = np.full(3, 1e4)
    opt = Adam([p], lr=1e-3)
    opt.step()
    p.data = p.data.astype(np.float16)
    p.grad = np.ones(3, np.float16)
    before = snapshot(p, opt)
    with pytest.raises(DTypeError, match=r"Adam: state 'exp_avg_sq': 3 of 3 entries overflow float16"):
        opt.step()
    assert_unchanged(p, opt, before)
