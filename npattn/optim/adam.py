"""``torch.optim.Adam`` and ``AdamW``: L2 weight decay vs decoupled weight decay."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import ConfigError, StateDictError, TrainingError
from npattn.nn.module import Parameter
from npattn.optim.checks import adam_settings, check_adam_buffers, check_torch_switches
from npattn.optim.optimizer import Optimizer, ParamsLike, Update

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False, *, maximize=False, foreach=None, capturable=False, differentiable=False,
    fused=None, decoupled_weight_decay=False)``; weight decay is L2 (added to the gradient). The
    implementation switches are accepted at values that change nothing.

    Raises:
        ConfigError: a negative lr, eps or weight_decay; betas outside [0, 1); no parameters;
            foreach=True, fused=True, capturable=True, differentiable=True, or
            decoupled_weight_decay=True (use AdamW).
    """

    decoupled_weight_decay = False

    def __init__(
        self,
        params: ParamsLike,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        switches = dict(foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused)
        if not self.decoupled_weight_decay:  # AdamW is Adam with it set; torch's AdamW has no such argument
            switches["decoupled_weight_decay"] = decoupled_weight_decay
        check_torch_switches(type(self).__name__, **switches)
        settings = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, {**settings, "maximize": maximize})

    buffers = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    switches = ("foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay")

    def _check_switches(self, switches: dict[str, Any]) -> None:
        if self.decoupled_weight_decay and "decoupled_weight_decay" in switches:  # what AdamW is
            switches = dict(switches)
            if switches.pop("decoupled_weight_decay") is not True:
                raise ConfigError("AdamW: decoupled_weight_decay must be True (AdamW is Adam with it set)")
        super()._check_switches(switches)

    def _check_settings(self, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
        return adam_settings(settings, where)

    def _check_buffers(
        self, buffers: Any, p: Parameter, settings: Mapping[str, Any], what: Any, error: type[Exception]
    ) -> None:
        super()._check_buffers(buffers, p, settings, what, error)
        check_adam_buffers(buffers, settings["amsgrad"], self.buffers, what, error)

    def _update(self, data: np.ndarray, grad: np.ndarray, group: dict[str, Any], state: dict[str, Any]) -> Update:
        # g_t = -grad if maximize else grad
        # Adam:  if weight_decay != 0: g_t = g_t + weight_decay * theta_{t-1}
        # AdamW: theta_t = theta_{t-1} - lr * weight_decay * theta_{t-1}
        # m_t = beta1 * m_{t-1} + (1 - beta1) * g_t
        # v_t = beta2 * v_{t-1} + (1 - beta2) * g_t^2
        # m_hat = m_t / (1 - beta1^t);  v_hat = v_t / (1 - beta2^t)   (amsgrad: v_max = max(v_max, v_t))
        # theta_t = theta_t - lr * m_hat / (sqrt(v_hat) + eps)
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        t = state.get("step", 0) + 1
        if wd != 0 and self.decoupled_weight_decay and not group["maximize"] and np.shares_memory(grad, data):
            # torch decays the weights in place first, and a .grad sharing them sees it (with maximize,
            # torch negates the gradient into a new tensor before the decay: it sees the old weights)
            kept = data.copy()
            data *= 1 - lr * wd
            grad, data[...] = grad.copy(), kept
        g = -grad if group["maximize"] else grad
        if wd != 0:
            if self.decoupled_weight_decay:
                data = data * (1 - lr * wd)
            else:
                g = g + wd * data
        # New arrays, one temporary: the arithmetic of m = beta1 * m + (1 - beta1) * g and
        # v = beta2 * v + (1 - beta2) * g * g, operation for operation.
        m_old, v_old = state.get("exp_avg"), state.get("exp_avg_sq")
        tmp = np.multiply(g, 1 - beta1)
        m = np.zeros_like(data) if m_old is None else m_old * beta1
        m += tmp
        np.multiply(g, 1 - beta2, out=tmp)
        with np.errstate(over="ignore"):  # a square that overflows is refused below, not warned of
            tmp *= g
        v = np.zeros_like(data) if v_old is None else v_old * beta2
        v += tmp
        overflowed = not np.isfinite(v).all() and np.isfinite(g).all()  # a finite gradient whose square overflows
        if overflowed and (v_old is None or np.isfinite(v_old).all()):  # (a state edited to inf: its own check)
            raise TrainingError(
                f"the update would make 'exp_avg_sq' non-finite: the square of a gradient of up to "
                f"{float(np.max(np.abs(g))):.3g} overflows {data.dtype}; nothing was changed (torch stores inf "
                "there, and those weights never move again): scale the loss down or clip the gradients"
            )
        buffers = {"step": t, "exp_avg": m, "exp_avg_sq": v}
        if group["amsgrad"]:
            v_max = state.get("max_exp_avg_sq")
            v = buffers["max_exp_avg_sq"] = v.copy() if v_max is None else np.maximum(v_max, v)
        elif "max_exp_avg_sq" in state:  # amsgrad switched off mid-run: kept unchanged and unused, as in torch
            buffers["max_exp_avg_sq"] = state["max_exp_avg_sq"]
        # The same arithmetic in PyTorch's order: lr / (1 - beta1^t) and sqrt(v) / sqrt(1 - beta2^t) + eps.
        step_size = lr / (1 - beta1 ** min(t, 2**1023))  # a larger int has no float (beta**t is 0 long before)
        with np.errstate(invalid="raise"):  # only a negative v raises (a NaN passes quietly, as in torch)
            try:
                denom = np.sqrt(v, out=tmp)
            except FloatingPointError:
                name = "max_exp_avg_sq" if group["amsgrad"] else "exp_avg_sq"
                raise StateDictError(
                    f"the state {name!r} holds negative values (a running mean of "
                    "squares is >= 0; was it edited by hand?): its square root would make the weights NaN"
                ) from None
        denom /= math.sqrt(1 - beta2 ** min(t, 2**1023))
        denom += eps
        np.divide(m, denom, out=denom)
        denom *= step_size
        return np.subtract(data, denom, out=denom), buffers


class AdamW(Adam):
    """``torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False, *, maximize=False, foreach=None, capturable=False, differentiable=False,
    fused=None)``: Adam with decoupled weight decay (the weights shrink by ``lr * weight_decay``
    before the Adam step).

    Raises:
        ConfigError: as Adam.
    """

    decoupled_weight_decay = True

    def __init__(
        self,
        params: ParamsLike,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
            capturable=capturable, differentiable=differentiable, fused=fused,
        )  # fmt: skip
