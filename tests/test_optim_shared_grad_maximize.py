"""AdamW with maximize=True and a ``.grad`` that is the parameter's own ``.data``: torch negates the
gradient into a new tensor before it decays the weights in place, so the step reads the weights
before the decay, as with a copy. npattn read them after the decay (1.3e-3 off torch)."""

import numpy as np
import pytest

import npattn
from npattn.optim import AdamW

W = np.array([[1.0, -2.0], [0.5, 3.0], [-0.25, 0.75]])


def _stepped(shared: bool, maximize: bool) -> np.ndarray:
    p = npattn.Parameter(W.copy())
    opt = AdamW([p], lr=0.1, weight_decay=0.5, eps=1.0, maximize=maximize)
    for _ in range(3):
        p.grad = p.data if shared else p.data.copy()
        opt.step()
    return p.data


def test_with_maximize_a_shared_grad_steps_as_a_copy():
    np.testing.assert_array_equal(_stepped(True, True), _stepped(False, True))


def test_without_maximize_a_shared_grad_sees_the_decay():
    assert not np.array_equal(_stepped(True, False), _stepped(False, False))


@pytest.mark.parametrize("maximize", [True, False])
def test_a_shared_grad_matches_torch(maximize):
    torch = pytest.importorskip("torch")
    t = torch.nn.Parameter(torch.tensor(W))
    opt = torch.optim.AdamW([t], lr=0.1, weight_decay=0.5, eps=1.0, maximize=maximize)
    for _ in range(3):
        t.grad = t.detach()
        opt.step()
    np.testing.assert_allclose(_stepped(True, maximize), t.detach().numpy(), rtol=0, atol=1e-15)
