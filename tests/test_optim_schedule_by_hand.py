"""A learning-rate schedule and gradient clipping done by hand on npattn's optimizers (set
group["lr"] between steps, scale .grad in place) give torch's StepLR and clip_grad_norm_ numbers."""

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, AdamW


def _grads(step, shapes):
    rng = np.random.default_rng(step)
    return [rng.standard_normal(s) * 3.0 for s in shapes]


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_step_lr_and_norm_clipping_match_torch(kind):
    torch = pytest.importorskip("torch")
    model = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    params = list(model.parameters())
    tparams = [torch.nn.Parameter(torch.tensor(p.data.copy())) for p in params]
    if kind == "sgd":
        opt, topt = SGD(params, lr=0.1, momentum=0.9), torch.optim.SGD(tparams, lr=0.1, momentum=0.9)
    else:
        opt, topt = AdamW(params, lr=0.1), torch.optim.AdamW(tparams, lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)
    for step in range(6):
        grads = _grads(step, [p.shape for p in params])
        for p, tp, g in zip(params, tparams, grads):
            p.grad = g.copy()
            tp.grad = torch.tensor(g.copy())
        torch.nn.utils.clip_grad_norm_(tparams, max_norm=1.0)
        total = np.sqrt(sum(float(np.sum(p.grad**2)) for p in params))
        for p in params:  # clip_grad_norm_ by hand
            p.grad *= min(1.0, 1.0 / (total + 1e-6))
        for group in opt.param_groups:  # StepLR by hand
            group["lr"] = 0.1 * 0.5 ** (step // 2)
        opt.step()
        topt.step()
        sched.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=0, atol=1e-12)
