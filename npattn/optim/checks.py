"""The checks behind every way an optimizer setting or buffer enters (``npattn.optim``).

The constructor, a per-group dict, ``add_param_group``, ``load_state_dict`` and ``step()`` all call
these, so a learning rate, a pair of betas or a flag is refused with the same message wherever it
comes from (``parameter group 1: Invalid learning rate: -1 (must be >= 0)``). The common cases
(a float in range, a ``.grad`` of the parameter's shape and dtype) are recognised first without
the slower general checks, because ``step()`` runs them on every update.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, KeysView, Mapping, Set
from typing import Any

import numpy as np

from npattn._checks import as_array, as_number, check_bool, finite_float, from_tensor, shown
from npattn.errors import ConfigError, DTypeError, ShapeError, StateDictError
from npattn.nn.module import Parameter

__all__ = [
    "adam_settings",
    "as_list",
    "as_number",
    "check_adam_buffers",
    "check_buffer_shapes",
    "check_buffer_values",
    "check_complete",
    "check_grad",
    "check_names",
    "check_torch_switches",
    "converted_buffers",
    "name_of",
    "not_a_parameter",
    "refuse_shared_weights",
    "saved_group",
    "saved_index",
    "sgd_settings",
    "split_names",
    "step_count",
]


def _nonnegative(value: Any, name: str) -> float:
    if type(value) is float and 0.0 <= value < math.inf:  # the common case, without the ABC checks below
        return value
    value = as_number(value)
    if isinstance(value, np.ndarray):
        got = f"an array of shape {value.shape} and dtype {value.dtype}"
        raise ConfigError(f"Invalid {name}: expected a finite number >= 0, got {got}")
    number = finite_float(value)
    if number is None:
        raise ConfigError(f"Invalid {name}: expected a finite number >= 0, got {shown(value)}")
    if number < 0:
        raise ConfigError(f"Invalid {name}: {value} (must be >= 0)")
    return number


def _betas(betas: Any) -> tuple[float, float]:
    if type(betas) is tuple and len(betas) == 2 and all(type(b) is float and 0.0 <= b < 1.0 for b in betas):
        return betas
    try:
        beta1, beta2 = betas
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid betas: expected a pair (beta1, beta2), got {betas!r}") from None
    beta1, beta2 = as_number(beta1), as_number(beta2)
    for i, beta in enumerate((beta1, beta2)):
        number = finite_float(beta)
        if number is None or not 0.0 <= number < 1.0:
            raise ConfigError(f"Invalid beta parameter at index {i}: {shown(beta)} (must lie in [0, 1))")
    return float(beta1), float(beta2)


def sgd_settings(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """SGD's settings, checked and normalised; ``where`` (``"parameter group 1: "``) prefixes errors."""
    try:
        checked = {
            "lr": _nonnegative(settings["lr"], "learning rate"),
            "momentum": _nonnegative(settings["momentum"], "momentum value"),
            "dampening": _nonnegative(settings["dampening"], "dampening value"),
            "weight_decay": _nonnegative(settings["weight_decay"], "weight_decay value"),
            "nesterov": check_bool(settings["nesterov"], "nesterov"),
            "maximize": check_bool(settings["maximize"], "maximize"),
        }
        if checked["nesterov"] and (checked["momentum"] <= 0 or checked["dampening"] != 0):
            raise ConfigError("Nesterov momentum requires a momentum and zero dampening")
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None
    return checked


def adam_settings(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Adam's and AdamW's settings, checked and normalised (betas become a tuple of floats)."""
    try:
        return {
            "lr": _nonnegative(settings["lr"], "learning rate"),
            "betas": _betas(settings["betas"]),
            "eps": _nonnegative(settings["eps"], "epsilon value"),
            "weight_decay": _nonnegative(settings["weight_decay"], "weight_decay value"),
            "amsgrad": check_bool(settings["amsgrad"], "amsgrad"),
            "maximize": check_bool(settings["maximize"], "maximize"),
        }
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None


def check_complete(
    group: Mapping[str, Any], names: Iterable[str], where: str, what: str, error: type[Exception], hint: str = ""
) -> None:
    """Every setting ``names`` lists is in ``group`` (a deleted ``'lr'`` must not fall back to the
    constructor's value; PyTorch raises KeyError)."""
    missing = sorted(k for k in names if k not in group)
    if missing:
        raise error(f"{where}{what} lacks the setting(s) {', '.join(map(repr, missing))}{hint}")


def as_list(params: Any, message: str) -> list[Any]:
    """``list(params)``, or ConfigError ``message`` for a non-iterable (a Module: pass model.parameters())
    or an unordered set: its order changes between runs, so a saved state_dict's indices would pair
    each parameter with another's state. A dict's keys view keeps insertion order and is taken."""
    if type(params) is not list and (isinstance(params, (str, bytes, Mapping)) or not isinstance(params, Iterable)):
        hint = " (pass model.parameters())" if hasattr(params, "parameters") else ""
        raise ConfigError(f"{message}, got {type(params).__name__}{hint}")
    if isinstance(params, Set) and not isinstance(params, KeysView):
        raise ConfigError(
            f"{message} in a fixed order (a list, tuple or generator), got a {type(params).__name__}: a set's "
            "order changes between runs, so state_dict() indices would pair parameters with another's state; "
            "use a list such as list(model.parameters())"
        )
    return list(params)


def name_of(what: Any) -> str:
    """``(class name, parameter index, group index)`` as words; other values as they are."""
    return f"{what[0]} parameter {what[1]} of group {what[2]}" if isinstance(what, tuple) else str(what)


def check_grad(p: Parameter, what: Any) -> np.ndarray:
    """The ``.grad`` ``step()`` uses: the parameter's shape, converted to its dtype; writable ``.data``.

    Raises:
        ShapeError, DTypeError: a ``.grad`` of another shape or not real numbers.
        ConfigError: a read-only ``.data`` (it is updated in place).
    """
    grad, data = p.grad, p.data
    if type(grad) is np.ndarray and grad.shape == data.shape and grad.dtype == data.dtype and data.flags.writeable:
        return grad  # the common case, checked without building anything
    what = name_of(what)
    if not isinstance(data, np.ndarray) or not data.flags.writeable:
        raise ConfigError(f"{what}: its .data is read-only, so it cannot be updated in place")
    if getattr(from_tensor(grad), "dtype", None) == np.bool_ or isinstance(grad, bool):  # no gradient
        raise DTypeError(f"{what}: .grad has dtype bool, expected numbers (the parameter's dtype {data.dtype})")
    grad = as_array(grad, f"{what}: .grad", data.dtype)
    if grad.shape != data.shape:
        raise ShapeError(f"{what}: .grad has shape {grad.shape}, the parameter has {data.shape}")
    return grad


def check_buffer_shapes(
    buffers: Any, p: Parameter, names: tuple[str, ...], owner: str, what: Any, error: type[Exception]
) -> None:
    """A parameter's state: a dict of known buffer names, every array of the parameter's shape and a
    float dtype (``step()`` would compute with an integer or bool buffer edited in by hand; a float
    buffer of another dtype, left by ``Module.to`` after steps, is cast to the parameter's by
    ``step()``, as PyTorch's ``load_state_dict`` casts state)."""
    if type(buffers) is not dict and not isinstance(buffers, Mapping):
        raise error(f"{name_of(what)}: its state must be a dict of buffers, got {type(buffers).__name__}")
    if not buffers.keys() <= frozenset(names):
        unknown = sorted(str(k) for k in buffers if k not in names)
        raise error(
            f"{name_of(what)}: unknown state {', '.join(map(repr, unknown))} ({owner} keeps {', '.join(names)})"
        )
    shape, dtype = p.shape, p.data.dtype
    for name, value in buffers.items():
        if name == "step":
            continue
        if not isinstance(value, np.ndarray):
            hint = " (convert a torch tensor with .numpy())" if type(value).__module__.startswith("torch") else ""
            raise error(
                f"{name_of(what)}: state {name!r} is a {type(value).__name__}, expected a NumPy array of the "
                f"parameter's shape {shape}{hint}"
            )
        if value.shape != shape:
            raise error(f"{name_of(what)}: state {name!r} has shape {value.shape}, the parameter has {shape}")
        if value.dtype != dtype and (value.dtype.kind != "f" or dtype.kind != "f"):
            raise error(
                f"{name_of(what)}: state {name!r} has dtype {value.dtype}, the parameter has {dtype} "
                "(a float buffer is cast to the parameter's dtype; an integer or bool one is refused)"
            )


def check_adam_buffers(
    buffers: Mapping[str, Any], amsgrad: bool, names: tuple[str, ...], what: Any, error: type[Exception]
) -> None:
    """Adam's state is empty (before the first step) or holds a step count >= 1 and every moment.
    With amsgrad=False a 'max_exp_avg_sq' may stay (amsgrad switched off mid-run): as in PyTorch it
    is kept unchanged and unused, and used again if amsgrad is switched back on."""
    if not buffers:
        return
    wanted = names if amsgrad or names[3] in buffers else names[:3]
    if amsgrad and buffers.keys() == frozenset(names[:3]):
        raise error(
            f"{name_of(what)}: amsgrad=True, but its state has no 'max_exp_avg_sq': amsgrad was switched on "
            "after steps were taken without it (set it when the optimizer is built, or start a new optimizer)"
        )
    if len(buffers) != len(wanted) or not buffers.keys() <= frozenset(wanted):
        raise error(
            f"{name_of(what)}: expected the buffers {sorted(wanted)} (amsgrad={amsgrad}), got {sorted(buffers)}"
        )
    step = buffers["step"]
    if (type(step) is not int and (isinstance(step, bool) or not isinstance(step, numbers.Integral))) or step < 1:
        raise error(f"{name_of(what)}: 'step' must be an integer >= 1 (the number of updates so far), got {step!r}")


def step_count(value: Any) -> Any:
    """A saved step count as an int: PyTorch saves it as a float tensor (``tensor(3.)``), a loaded
    checkpoint may hold a NumPy integer; a value that is no whole number is returned unchanged for
    ``check_adam_buffers`` to refuse."""
    value = as_number(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def converted_buffers(buffers: Any, dtype: np.dtype, what: str) -> dict[str, Any]:
    """A loaded parameter's state as ``step()`` keeps it: the step count an int, every buffer a copy
    converted to the parameter's ``dtype``. A buffer must be floating point and at least as wide as
    the parameter: a wider float is cast down, as PyTorch's ``load_state_dict`` casts state to the
    parameter's dtype; a narrower float (its lost digits would make the resumed run differ from an
    uninterrupted one), an integer or a bool buffer is refused.

    Raises:
        StateDictError: not a dict; a buffer that is no array of real numbers, or one whose dtype
            is not a float at least as wide as the parameter's ``dtype``.
    """
    if not isinstance(buffers, Mapping):
        raise StateDictError(f"{what} must be a dict of buffers, got {type(buffers).__name__}")
    converted = {}
    for name, value in buffers.items():
        if name == "step":
            converted[name] = step_count(value)
            continue
        if value is None:  # no buffer yet (torch 1.x's SGD saves momentum_buffer=None): as if absent, as torch reads it
            continue
        value = from_tensor(value)
        got = value.dtype if isinstance(value, (np.ndarray, np.generic)) else None  # lists take the dtype
        if got is not None and (got.kind in "biu" or (got.kind == "f" and got.itemsize < np.dtype(dtype).itemsize)):
            raise StateDictError(
                f"{what}: {name!r} has dtype {got}, expected {np.dtype(dtype)} (the parameter's dtype; "
                "a wider float is cast to it, a narrower float, an integer or a bool is refused)"
            )
        try:
            arr = as_array(value, f"{what}: {name!r}", dtype)
        except (ShapeError, DTypeError) as exc:
            raise StateDictError(str(exc)) from None
        converted[name] = np.array(arr, copy=True)
    return converted


def check_buffer_values(buffers: Mapping[str, Any], what: str) -> None:
    """Finite buffers, and non-negative running means of squares (else NaN weights at the next step)."""
    for name, value in buffers.items():
        if isinstance(value, np.ndarray) and not np.isfinite(value).all():
            raise StateDictError(f"{what}: {name!r} holds NaN or inf")
        if name in ("exp_avg_sq", "max_exp_avg_sq") and (value < 0).any():
            raise StateDictError(f"{what}: {name!r} holds negative values (a running mean of squares is >= 0)")


_SWITCHES = {
    "foreach": ((None, False), "npattn updates one parameter at a time, which is PyTorch's foreach=False"),
    "fused": ((None, False), "npattn has no fused kernel"),
    "capturable": ((False,), "there are no CUDA graphs to capture on the CPU"),
    "differentiable": ((False,), "npattn does not differentiate through the optimizer step"),
    "decoupled_weight_decay": ((False,), "use AdamW, which is Adam with decoupled weight decay"),
}


def check_torch_switches(owner: str, **switches: Any) -> None:
    """PyTorch's implementation switches, accepted at values that change nothing in npattn (their
    defaults; foreach and fused also False, npattn's own way of updating; a value equal to False
    such as 0 or np.False_ counts as False) and refused otherwise.

    Raises:
        ConfigError: naming the switch, the value and why npattn cannot honour it.
    """
    for name, value in switches.items():
        allowed, why = _SWITCHES[name]
        off = isinstance(value, (bool, np.bool_, numbers.Integral)) and not value  # False, 0, np.False_
        if not ((value is None and None in allowed) or off):
            shown = " or ".join(map(repr, allowed))
            raise ConfigError(f"{owner}: {name}={value!r} is not supported ({why}); leave it at {shown}")


SCHEDULER_KEYS = ("initial_lr",)
"""Keys torch's lr schedulers add to a group; npattn has no scheduler and reads only ``lr``."""

LATER_SETTINGS = {"amsgrad": False, "maximize": False, "nesterov": False}
"""Settings later PyTorch versions added, which torch's optimizers set to these values when a
state dict of an older version lacks them (their ``__setstate__``); npattn loads such a dict alike.
Any other missing setting (``lr``, ``betas``, ...) is refused."""


def saved_group(saved: Mapping[str, Any], decoupled: bool | None, owner: str, where: str) -> dict[str, Any]:
    """A state dict's group without torch's scheduler keys, its ``decoupled_weight_decay`` (written
    by Adam and AdamW, as torch's do) checked against the optimizer loading it; a group without
    the flag (torch before 2.x, npattn before it was recorded) loads into either.

    Raises:
        StateDictError: the flag contradicts the class (an AdamW state dict into Adam: its decay
            would turn from decoupled into L2).
    """
    flag = saved.get("decoupled_weight_decay")
    if decoupled is not None and flag is not None and isinstance(flag, (bool, np.bool_)) and bool(flag) != decoupled:
        source, other = ("AdamW", "L2 decay (Adam)") if flag else ("Adam", "decoupled decay (AdamW)")
        raise StateDictError(
            f"{where}the state dict has decoupled_weight_decay={bool(flag)} (an {source} state dict); {owner} "
            f"expects {decoupled}, and loading it would continue the run with {other}: load it into {source}"
        )
    return {k: v for k, v in saved.items() if k not in SCHEDULER_KEYS}


def saved_index(key: Any, what: str) -> int:
    """A parameter index of a state dict (an int, as ``state_dict()`` writes; a string, as a JSON
    round trip gives, is refused with that hint). ``what`` starts the message (``'params' must list``).

    Raises:
        StateDictError: naming ``what`` and the value (a Parameter or array by its shape).
    """
    if isinstance(key, bool) or not isinstance(key, numbers.Integral):
        shape = getattr(key, "shape", None)  # a Parameter or array: its shape, never its values
        got = f"{type(key).__name__} of shape {tuple(shape)}" if shape is not None else f"{key!r:.60}"
        digits = isinstance(key, str) and key.strip().lstrip("-").isdigit()
        hint = f" (use {int(key)}; a JSON round trip turns int keys into strings)" if digits else ""
        raise StateDictError(f"{what} int indices (as state_dict() writes), got {got}{hint}")
    return int(key)


def _named(p: Any) -> bool:
    return isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)


def split_names(params: Any, given_names: Any, where: str) -> tuple[Any, list[str] | None]:
    """A group's ``params`` and its parameters' names: ``model.named_parameters()`` gives (name,
    Parameter) pairs, which torch 2.x takes and records as the group's ``param_names``; a group may
    also carry ``param_names`` itself (one str per parameter). Anything else is left for
    ``_check_params`` to describe.

    Raises:
        ConfigError: some entries named and others not; ``param_names`` not one str per parameter.
    """
    if isinstance(params, Parameter) or not isinstance(params, (list, tuple, Iterator)):
        listed = params
    else:
        listed = list(params)
    if isinstance(listed, list) and any(_named(p) for p in listed):
        if not all(_named(p) for p in listed):
            raise ConfigError(f"{where}all optimizer params should be with/without names. Some param names are missing")
        if given_names is not None:
            raise ConfigError(f"{where}give (name, Parameter) pairs or 'param_names', not both")
        return [p for _, p in listed], [name for name, _ in listed]
    if given_names is None:
        return listed, None
    count = len(listed) if isinstance(listed, list) else 1
    if not isinstance(given_names, (list, tuple)) or len(given_names) != count or not all(
        isinstance(n, str) for n in given_names
    ):
        raise ConfigError(f"{where}'param_names' must list one name (a str) per parameter, got {given_names!r:.80}")
    return listed, list(given_names)


def check_names(group: Mapping[str, Any], where: str, error: type[Exception]) -> None:
    """A group's ``param_names``, if it has them: one str per entry of its ``params`` (a parameter
    removed from ``params`` must leave ``param_names`` too, or the names would pair with others)."""
    if "param_names" not in group:
        return
    names, params = group["param_names"], group.get("params")
    count = len(params) if isinstance(params, (list, tuple)) else None
    if not isinstance(names, (list, tuple)) or len(names) != count or not all(isinstance(n, str) for n in names):
        raise error(
            f"{where}'param_names' must list one name (a str) per parameter ({count} in 'params'), got "
            f"{names!r:.80}; remove a parameter's name with the parameter"
        )


def not_a_parameter(owner: str, p: Any) -> ConfigError:
    """The error for a ``params`` entry that is not an npattn.Parameter."""
    return ConfigError(f"{owner} can only optimize npattn.Parameter, got {type(p).__name__}")


def refuse_shared_weights(params: list[Parameter], owner: str) -> None:
    """Two parameters a step updates whose ``.data`` share memory (``b.data = a.data``, a view of
    another's weights): each update is computed from the old weights, so the last one stored would
    silently drop the others. Arrays can share memory only through a common base (the object
    that owns the buffer): those with one are confirmed with ``np.shares_memory`` (a few
    attribute reads per parameter otherwise).

    Raises:
        ConfigError: naming the two parameters by their positions in the step and their shapes.
    """
    seen: dict[int, list[int]] = {}
    for i, p in enumerate(params):
        root = p.data
        while isinstance(root, np.ndarray) and root.base is not None:
            root = root.base
        earlier = seen.setdefault(id(root), [])
        j = next((j for j in earlier if np.shares_memory(params[j].data, p.data)), None)
        earlier.append(i)
        if j is not None:
            raise ConfigError(
                f"{owner}.step: parameters {j} and {i} (shapes {params[j].shape}, {p.shape}) share memory: "
                "each update would be computed from the old weights and one would be lost; tie weights by "
                "sharing one Parameter (module.b = module.a), not its .data"
            )
