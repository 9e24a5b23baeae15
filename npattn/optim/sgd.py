"""``torch.optim.SGD``'s update rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.optim.checks import check_torch_switches, sgd_settings
from npattn.optim.optimizer import Optimizer, ParamsLike, Update

__all__ = ["SGD"]


class SGD(Optimizer):
    """``torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
    *, maximize=False, foreach=None, differentiable=False, fused=None)``; the implementation
    switches (foreach, differentiable, fused) are accepted at values that change nothing.

    Raises:
        ConfigError: a negative lr, momentum or weight_decay; nesterov without momentum or with
            dampening; no parameters; foreach=True, fused=True or differentiable=True.
    """

    def __init__(
        self,
        params: ParamsLike,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_torch_switches("SGD", foreach=foreach, differentiable=differentiable, fused=fused)
        settings = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
        super().__init__(params, {**settings, "nesterov": nesterov, "maximize": maximize})

    buffers = ("momentum_buffer",)
    switches = ("foreach", "differentiable", "fused")

    def _check_settings(self, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
        return sgd_settings(settings, where)

    def _update(self, data: np.ndarray, grad: np.ndarray, group: dict[str, Any], state: dict[str, Any]) -> Update:
        # g_t = -grad if maximize else grad
        # if weight_decay != 0: g_t = g_t + weight_decay * theta_{t-1}
        # if momentum != 0:
        #     b_t = g_t if t == 1 else momentum * b_{t-1} + (1 - dampening) * g_t
        #     g_t = g_t + momentum * b_t if nesterov else b_t
        # theta_t = theta_{t-1} - lr * g_t
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        g = -grad if group["maximize"] else grad
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * data
        buffers = dict(state)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            buffers["momentum_buffer"] = buf
            g = g + momentum * buf if group["nesterov"] else buf
        return data - lr * g, buffers
