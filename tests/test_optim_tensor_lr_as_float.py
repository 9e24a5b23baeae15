"""A setting given as a 0-d tensor or array (PyTorch's ``lr=torch.tensor(0.1)``) is read as its
number widened exactly to a Python float, in the constructor and in a loaded torch state dict, and
the update is computed in float64 with it (not in torch's float32 for a float32 tensor lr): the
documented behaviour, pinned bit for bit against a run given that float."""

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, Adam, AdamW

LR32 = float(np.float32(0.1))  # 0.10000000149011612


def run(cls, lr, steps=3, state=None):
    p = npattn.nn.Parameter(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    opt = cls([p], lr=0.5)
    if state is not None:
        opt.load_state_dict(state)
    else:
        opt = cls([p], lr=lr)
    for i in range(steps):
        p.grad[...] = np.cos(p.data * (i + 1))
        opt.step()
    return p.data, opt


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_float32_array_lr_is_its_float64_number(cls):
    data, opt = run(cls, np.array(0.1, dtype=np.float32))
    assert type(opt.param_groups[0]["lr"]) is float and opt.param_groups[0]["lr"] == LR32
    np.testing.assert_array_equal(data, run(cls, LR32)[0])


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW"])
def test_a_torch_state_dict_with_a_tensor_lr_continues_in_float64(cls):
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.zeros(2, 3, dtype=torch.float64))
    topt = getattr(torch.optim, cls)([tp], lr=torch.tensor(0.1))
    assert isinstance(topt.state_dict()["param_groups"][0]["lr"], torch.Tensor)
    ours = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW}[cls]
    data, opt = run(ours, None, state=topt.state_dict())
    assert type(opt.param_groups[0]["lr"]) is float and opt.param_groups[0]["lr"] == LR32
    np.testing.assert_array_equal(data, run(ours, LR32)[0])
    data_t, _ = run(ours, torch.tensor(0.1))
    np.testing.assert_array_equal(data_t, data)
