"""Optimizers with PyTorch's names, signatures and update rules: SGD, Adam, AdamW.

Each ``step()`` reads every Parameter's ``.grad`` and updates ``.data`` in place, exactly as
``torch.optim`` documents it (the algorithm boxes are quoted above each update). ``zero_grad()``
sets the grads to zero (npattn grads are arrays, never None). ``state_dict()`` holds the
hyper-parameters and the per-parameter state (step count, momentum/moment buffers) in PyTorch's
layout, ``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``, and
``load_state_dict`` restores it, so training resumes exactly.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from npattn.errors import ConfigError, StateDictError
from npattn.nn.module import Parameter

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]

ParamsLike = Iterable[Parameter] | Iterable[Mapping[str, Any]]


def _check_nonnegative(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"Invalid {name}: expected a finite number >= 0, got {value!r}")
    if value < 0:
        raise ConfigError(f"Invalid {name}: {value} (must be >= 0)")
    return float(value)


def _check_betas(betas: Any) -> tuple[float, float]:
    try:
        beta1, beta2 = betas
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid betas: expected a pair (beta1, beta2), got {betas!r}") from None
    for i, beta in enumerate((beta1, beta2)):
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not 0.0 <= float(beta) < 1.0:
            raise ConfigError(f"Invalid beta parameter at index {i}: {beta!r} (must lie in [0, 1))")
    return float(beta1), float(beta2)


class Optimizer:
    """Base class: ``param_groups`` (list of dicts with "params" and hyper-parameters) and ``state``
    (Parameter -> dict of its buffers). Subclasses implement ``_update(param, group, state)``.

    Raises:
        ConfigError: no parameters, or an entry that is not an npattn.Parameter.
    """

    def __init__(self, params: ParamsLike, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Parameter, dict[str, Any]] = {}
        if isinstance(params, Parameter):
            raise ConfigError("params must be an iterable of Parameters, got a single Parameter (use [param])")
        groups: list[Any] = list(params)
        if not groups:
            raise ConfigError(
                f"{type(self).__name__} got an empty parameter list: pass model.parameters() "
                "(a generator is used up after one pass)"
            )
        if not isinstance(groups[0], Mapping):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(dict(group))

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add ``{"params": [...], "lr": ..., ...}``; missing hyper-parameters take the defaults."""
        params = group["params"]
        params = [params] if isinstance(params, Parameter) else list(params)
        if not params:
            raise ConfigError(f"{type(self).__name__}: a parameter group has no parameters")
        for p in params:
            if not isinstance(p, Parameter):
                raise ConfigError(f"{type(self).__name__} can only optimize npattn.Parameter, got {type(p).__name__}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ConfigError("some parameters appear in more than one parameter group")
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self) -> None:
        """Set every parameter's ``.grad`` to zeros, in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad[...] = 0

    def step(self) -> None:
        """One update of every parameter from its current ``.grad``."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:  # frozen parameters (requires_grad=False) are skipped
                    self._update(p, group, self.state.setdefault(p, {}))

    def _update(self, param: Parameter, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """PyTorch's layout: parameters are replaced by their index across all groups; arrays copied."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        groups = [
            {**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
            for g in self.param_groups
        ]
        state = {index[id(p)]: copy.deepcopy(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore hyper-parameters and buffers from ``state_dict()`` output (or a loaded checkpoint).

        Everything is checked before anything changes.

        Raises:
            StateDictError: another number of groups or of parameters per group, unknown parameter
                indices, or buffers whose shape differs from their parameter's.
        """
        try:
            saved_groups = list(state_dict["param_groups"])
            saved_state = dict(state_dict["state"])
        except (KeyError, TypeError) as exc:
            raise StateDictError(f"optimizer state_dict needs 'state' and 'param_groups', got {exc!r}") from None
        if len(saved_groups) != len(self.param_groups):
            raise StateDictError(
                f"loaded state dict has {len(saved_groups)} parameter groups, "
                f"this optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Parameter] = {}
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise StateDictError(
                    f"parameter group {i}: the state dict has {len(saved['params'])} parameters, "
                    f"this optimizer has {len(group['params'])}"
                )
            by_index.update({int(k): p for k, p in zip(saved["params"], group["params"])})
        new_state: dict[Parameter, dict[str, Any]] = {}
        for key, buffers in saved_state.items():
            if int(key) not in by_index:
                raise StateDictError(f"state for parameter index {key}, which no parameter group lists")
            param = by_index[int(key)]
            for name, value in buffers.items():
                if isinstance(value, np.ndarray) and value.shape != param.shape:
                    raise StateDictError(
                        f"state {name!r} of parameter {key} has shape {value.shape}, the parameter has {param.shape}"
                    )
            new_state[param] = {
                name: value.astype(param.dtype, copy=True) if isinstance(value, np.ndarray) else value
                for name, value in buffers.items()
            }
        for saved, group in zip(saved_groups, self.param_groups):
            group.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})
            if "betas" in group:
                group["betas"] = tuple(group["betas"])
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join([*lines, ")"])


class SGD(Optimizer):
    """``torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
    *, maximize=False)``.

    Raises:
        ConfigError: a negative lr, momentum or weight_decay; nesterov without momentum or with
            dampening; no parameters.
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
    ) -> None:
        defaults = {
            "lr": _check_nonnegative(lr, "learning rate"),
            "momentum": _check_nonnegative(momentum, "momentum value"),
            "dampening": float(dampening),
            "weight_decay": _check_nonnegative(weight_decay, "weight_decay value"),
            "nesterov": bool(nesterov),
            "maximize": bool(maximize),
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ConfigError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _update(self, param: Parameter, group: dict[str, Any], state: dict[str, Any]) -> None:
        # g_t = -grad if maximize else grad
        # if weight_decay != 0: g_t = g_t + weight_decay * theta_{t-1}
        # if momentum != 0:
        #     b_t = g_t if t == 1 else momentum * b_{t-1} + (1 - dampening) * g_t
        #     g_t = g_t + momentum * b_t if nesterov else b_t
        # theta_t = theta_{t-1} - lr * g_t
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        grad = _grad(param)
        g = -grad if group["maximize"] else grad
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * param.data
        if momentum != 0:
            buf = state.get("momentum_buffer")
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            state["momentum_buffer"] = buf
            g = g + momentum * buf if group["nesterov"] else buf
        param.data -= lr * g


class Adam(Optimizer):
    """``torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False, *, maximize=False)``; weight decay is L2 (added to the gradient).

    Raises:
        ConfigError: a negative lr, eps or weight_decay; betas outside [0, 1); no parameters.
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
    ) -> None:
        defaults = {
            "lr": _check_nonnegative(lr, "learning rate"),
            "betas": _check_betas(betas),
            "eps": _check_nonnegative(eps, "epsilon value"),
            "weight_decay": _check_nonnegative(weight_decay, "weight_decay value"),
            "amsgrad": bool(amsgrad),
            "maximize": bool(maximize),
        }
        super().__init__(params, defaults)

    def _update(self, param: Parameter, group: dict[str, Any], state: dict[str, Any]) -> None:
        # g_t = -grad if maximize else grad
        # Adam:  if weight_decay != 0: g_t = g_t + weight_decay * theta_{t-1}
        # AdamW: theta_t = theta_{t-1} - lr * weight_decay * theta_{t-1}
        # m_t = beta1 * m_{t-1} + (1 - beta1) * g_t
        # v_t = beta2 * v_{t-1} + (1 - beta2) * g_t^2
        # m_hat = m_t / (1 - beta1^t);  v_hat = v_t / (1 - beta2^t)   (amsgrad: v_max = max(v_max, v_t))
        # theta_t = theta_t - lr * m_hat / (sqrt(v_hat) + eps)
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(param.data)
            state["exp_avg_sq"] = np.zeros_like(param.data)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(param.data)
        state["step"] += 1
        t = state["step"]
        grad = _grad(param)
        g = -grad if group["maximize"] else grad
        if wd != 0:
            if self.decoupled_weight_decay:
                param.data *= 1 - lr * wd
            else:
                g = g + wd * param.data
        # In place, one temporary: the arithmetic of m = beta1 * m + (1 - beta1) * g and
        # v = beta2 * v + (1 - beta2) * g * g, operation for operation.
        m, v = state["exp_avg"], state["exp_avg_sq"]
        tmp = np.multiply(g, 1 - beta1)
        m *= beta1
        m += tmp
        np.multiply(g, 1 - beta2, out=tmp)
        tmp *= g
        v *= beta2
        v += tmp
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
            v = state["max_exp_avg_sq"]
        # The same arithmetic in PyTorch's order: lr / (1 - beta1^t) and sqrt(v) / sqrt(1 - beta2^t) + eps.
        step_size = lr / (1 - beta1**t)
        denom = np.sqrt(v, out=tmp)
        denom /= math.sqrt(1 - beta2**t)
        denom += eps
        np.divide(m, denom, out=denom)
        denom *= step_size
        param.data -= denom


class AdamW(Adam):
    """``torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False, *, maximize=False)``: Adam with decoupled weight decay (the weights shrink by
    ``lr * weight_decay`` before the Adam step).

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
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


def _grad(param: Parameter) -> np.ndarray:
    """The gradient of a parameter ``step()`` updates (never a frozen one, whose grad is None)."""
    if param.grad is None:
        raise ConfigError("cannot update a frozen parameter (requires_grad=False)")
    return param.grad
