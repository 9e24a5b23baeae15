"""The base class of the optimizers: param groups, the one settings check, a validate-then-apply
``step()``, and ``state_dict``/``load_state_dict`` in PyTorch's layout (see ``npattn.optim``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from npattn._checks import cast
from npattn.errors import ConfigError, StateDictError, TrainingError
from npattn.nn.module import Parameter
from npattn.nn.parameter import zero_grads
from npattn.optim.checks import (
    LATER_SETTINGS,
    as_list,
    check_buffer_shapes,
    check_buffer_values,
    check_complete,
    check_grad,
    check_names,
    check_torch_switches,
    converted_buffers,
    name_of,
    not_a_parameter,
    refuse_shared_weights,
    saved_group,
    saved_index,
    split_names,
)

__all__ = ["DELETED", "Optimizer", "ParamsLike", "Update"]

ParamsLike = Iterable[Parameter] | Iterable[Mapping[str, Any]]
Update = tuple[np.ndarray, dict[str, Any]]  # a parameter's new values and buffers
DELETED = " (deleted: step() does not fall back to the constructor's value; set it again, as PyTorch needs too)"


class Optimizer:
    """Base class: ``param_groups`` (list of dicts with "params" and hyper-parameters) and ``state``
    (Parameter -> dict of its buffers). Subclasses list their settings in ``defaults``, check them in
    ``_check_settings`` and implement ``_update(data, grad, group, state)``, which returns the new
    values and buffers without changing anything (``step()`` stores them once all are computed).

    Raises:
        ConfigError: no parameters, an entry that is not an npattn.Parameter (a Module instead of
            ``model.parameters()``), a Parameter listed twice, or a setting out of range.
    """

    buffers: tuple[str, ...] = ()  # the names a parameter's state may hold
    switches: tuple[str, ...] = ()  # PyTorch's implementation switches a group may list (no-op values only)

    def __init__(self, params: ParamsLike, defaults: dict[str, Any]) -> None:
        self.defaults = self._check_settings(defaults, "")
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Parameter, dict[str, Any]] = {}
        name = type(self).__name__
        if isinstance(params, Parameter):
            raise ConfigError("params must be an iterable of Parameters, got a single Parameter (use [param])")
        groups = as_list(params, f"{name} expects an iterable of Parameters or of group dicts")
        if not groups:
            raise ConfigError(
                f"{name} got an empty parameter list: pass model.parameters() (a generator is used up after one pass)"
            )
        if not all(isinstance(g, Mapping) for g in groups):
            if any(isinstance(g, Mapping) for g in groups):
                raise ConfigError(f"{name}: params mixes group dicts and Parameters; pass one kind")
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ validation (one path for all)
    def _check_settings(self, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The subclass's settings, checked and normalised (floats, bools, a betas tuple)."""
        raise NotImplementedError

    def _check_group(self, group: Any, where: str) -> dict[str, Any]:
        """A group's settings (defaults filled in for missing ones), checked like the constructor's."""
        if type(group) is not dict and not isinstance(group, Mapping):
            raise ConfigError(
                f"{where}expected a dict such as {{'params': [...], 'lr': 0.01}}, got {type(group).__name__}"
            )
        switches = {k: group[k] for k in self.switches if k in group}
        if switches:  # PyTorch's implementation switches, as torch's own state_dict() lists them
            try:
                self._check_switches(switches)
            except ConfigError as exc:
                raise ConfigError(f"{where}{exc}") from None
            group = {k: v for k, v in group.items() if k not in switches}
        if not group.keys() <= {"params", "param_names", *self.defaults}:
            unknown = sorted(str(k) for k in group if k not in ("params", "param_names") and k not in self.defaults)
            raise ConfigError(
                f"{where}unknown setting(s) {', '.join(map(repr, unknown))} for {type(self).__name__} "
                f"(it takes {', '.join(self.defaults)})"
            )
        settings = {**self.defaults, **{k: v for k, v in group.items() if k not in ("params", "param_names")}}
        return self._check_settings(settings, where)

    def _check_switches(self, switches: dict[str, Any]) -> None:
        check_torch_switches(type(self).__name__, **switches)

    def _check_params(self, params: Any, where: str, others: Iterable[Parameter] = ()) -> list[Parameter]:
        name = type(self).__name__
        params = (
            [params]
            if isinstance(params, Parameter)
            else as_list(params, f"{where}'params' must be an iterable of Parameters")
        )
        if not params:
            raise ConfigError(f"{name}: {where}a parameter group has no parameters")
        seen: dict[int, int] = {}
        for i, p in enumerate(params):
            if type(p) is not Parameter and not isinstance(p, Parameter):
                raise not_a_parameter(name, p)
            if id(p) in seen:
                raise ConfigError(
                    f"{where}the same Parameter is listed twice in one group (positions {seen[id(p)]} and {i}); "
                    "it would be updated twice per step"
                )
            seen[id(p)] = i
        ids = {id(q) for q in others}
        for i, p in enumerate(params):
            if id(p) in ids:
                k = next((k for k, g in enumerate(self.param_groups) if any(q is p for q in g.get("params", ()))), "?")
                raise ConfigError(
                    f"some parameters appear in more than one parameter group: {where}its parameter at position {i} "
                    f"(shape {p.shape}) is in parameter group {k} already; a Parameter may be in one group only"
                )
        return params

    def check_param_groups(self, method: str) -> None:
        """Raises ConfigError (naming ``method``) for what ``step`` refuses in a group's 'params', which
        every method that reads the groups refuses first:
        a generator (one pass uses it up: the second read found no parameters, and state_dict()
        wrote a state of none), a single Parameter (the constructor and add_param_group take one
        alone; an edited group must list it), entries that are not Parameters, one listed twice
        (state_dict() wrote a state that dropped the others' buffers)."""
        others: list[Parameter] = []
        for i, group in enumerate(self.param_groups):
            params = group.get("params") if isinstance(group, Mapping) else None
            owner = f"{type(self).__name__}.{method}" if hasattr(self, method) else f"{method}: {type(self).__name__}"
            where = f"{owner}: parameter group {i}: "
            if isinstance(params, Iterator):
                raise ConfigError(
                    f"{where}'params' is a generator or iterator, which one pass uses up (step, zero_grad and "
                    "state_dict each read it): assign a list, such as list(model.parameters())"
                )
            if isinstance(params, Parameter):
                raise ConfigError(
                    f"{where}'params' is a single Parameter, expected a list of them: assign [p] (the constructor "
                    "and add_param_group take one alone and list it)"
                )
            if method != "step" and not (isinstance(params, (list, tuple)) and not params):
                others += self._check_params(params, where, others)  # step checks each group as it reads it; an
                # emptied group (a way to freeze its parameters) is refused by step alone, as before

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add ``{"params": [...], "lr": ..., ...}``; missing settings take the defaults. The group is a
        checked copy (torch keeps the dict given): edit ``param_groups[i]``, not the dict passed.

        Raises:
            ConfigError: as the constructor: no or non-Parameter params, a Parameter already
                optimized, an unknown setting or one out of range. Nothing is added then.
        """
        self.check_param_groups("add_param_group")
        where = f"parameter group {len(self.param_groups)}: "
        if not isinstance(group, Mapping) or "params" not in group:
            got = "a dict without 'params'" if isinstance(group, Mapping) else type(group).__name__
            raise ConfigError(f"{where}expected a dict such as {{'params': [...], 'lr': 0.01}}, got {got}")
        settings = self._check_group(group, where)
        given, names = split_names(group["params"], group.get("param_names"), where)
        if self.param_groups and (names is None) != ("param_names" not in self.param_groups[0]):
            raise ConfigError(
                f"{where}all optimizer param groups should be with/without names: cannot add a group "
                f"{'without' if names is None else 'with'} names (model.named_parameters()) to this optimizer"
            )
        others = [p for g in self.param_groups for p in g["params"]]
        params = self._check_params(given, where, others)
        self.param_groups.append({**settings, "params": params, **({} if names is None else {"param_names": names})})

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Set every parameter's ``.grad`` to zeros, in place (a ``.grad`` that is None stays None:
        frozen, or set to None; step() skips it too), as ``Module.zero_grad`` does.

        ``set_to_none=True`` (PyTorch's keyword and default) sets every ``.grad`` to None instead:
        ``step()`` skips such parameters until a backward gives them a gradient again (backward
        starts a None ``.grad`` from zeros). npattn's default stays False: zeros, in place.

        Raises:
            ConfigError: set_to_none not a bool.
        """
        self.check_param_groups("zero_grad")
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter from its current ``.grad`` (a ``.grad`` of None is skipped).

        ``closure``, as in PyTorch, is called once before the update (it recomputes the loss and
        the grads) and its return value is returned; without it ``step()`` returns None.
        Everything is checked first, so a failed step changes nothing.

        Raises:
            ConfigError: a closure that is not callable; a setting in ``param_groups`` out of range
                or missing (deleted), a Parameter listed twice.
            ShapeError, DTypeError: a ``.grad`` that does not fit its parameter.
            StateDictError: an optimizer buffer (edited by hand) of another shape or dtype than its
                parameter, Adam's ``step`` below 1 or a negative ``exp_avg_sq``.
            ConfigError: a read-only ``.data``.
        """
        self.check_param_groups("step")
        loss = None
        if closure is not None:
            if not callable(closure):
                raise ConfigError(
                    "step(closure): expected a function that recomputes and returns the loss, "
                    f"got {type(closure).__name__}"
                )
            loss = closure()
        work = []
        others: list[Parameter] = []
        for i, group in enumerate(self.param_groups):
            where = f"parameter group {i}: "
            settings = self._check_group(group, where)
            check_complete(group, self.defaults, where, "the group", ConfigError, DELETED)
            params = self._check_params(group.get("params"), where, others)
            check_names(group, where, ConfigError)
            others += params
            for j, p in enumerate(params):
                if p.grad is None:  # a frozen parameter's, unless set by hand (then used, as in PyTorch)
                    continue
                what = (type(self).__name__, j, i)  # formatted only for an error
                grad = check_grad(p, what)
                self._check_buffers(self.state.get(p, {}), p, settings, what, StateDictError)
                work.append((p, grad, settings, what))
        refuse_shared_weights([p for p, _, _, _ in work], type(self).__name__)
        # Every new value is computed before any is stored, so nothing fails halfway through.
        updates = []
        for p, grad, settings, what in work:
            try:
                updates.append((p, *self._new_values(p, grad, settings)))
            except (StateDictError, TrainingError) as exc:  # a buffer edited by hand, or one the update overflows
                raise type(exc)(f"{type(self).__name__}.step: {name_of(what)}: {exc}") from None
        for p, data, buffers in updates:
            p.data[...] = data
            self.state.setdefault(p, {}).clear()
            self.state[p].update(buffers)
        return loss

    def _new_values(self, p: Parameter, grad: np.ndarray, settings: dict[str, Any]) -> Update:
        """``_update``; a 0-d parameter on one-element views (NumPy's 0-d arithmetic gives scalars).
        Float buffers of another dtype (the model converted with ``to`` after steps) are cast to the
        parameter's first, as torch's ``load_state_dict`` casts state."""
        state = self.state.get(p, {})
        dtype = p.data.dtype
        if any(isinstance(v, np.ndarray) and v.dtype != dtype for v in state.values()):
            state = {k: cast(v, dtype, f"{type(self).__name__}: state {k!r}") if isinstance(v, np.ndarray) else v
                     for k, v in state.items()}  # fmt: skip
        if p.data.ndim != 0:
            return self._update(p.data, grad, settings, state)
        flat = {k: v.reshape(1) if isinstance(v, np.ndarray) else v for k, v in state.items()}
        data, buffers = self._update(p.data.reshape(1), grad.reshape(1), settings, flat)
        return data.reshape(()), {k: v.reshape(()) if isinstance(v, np.ndarray) else v for k, v in buffers.items()}

    def _check_buffers(
        self, buffers: Any, p: Parameter, settings: Mapping[str, Any], what: Any, error: type[Exception]
    ) -> None:
        """A parameter's state: known buffer names, arrays of the parameter's shape (Adam: see there)."""
        check_buffer_shapes(buffers, p, self.buffers, type(self).__name__, what, error)

    def _update(self, data: np.ndarray, grad: np.ndarray, group: dict[str, Any], state: dict[str, Any]) -> Update:
        """The parameter's new values and new buffers, computed without changing ``data`` or ``state``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """PyTorch's layout: parameters are replaced by their index across all groups; arrays copied.
        The state of a parameter no group lists any more (removed from ``param_groups[i]['params']``,
        a way to freeze it) is left out: it has no index, so nothing could load it back (torch raises
        KeyError here)."""
        self.check_param_groups("state_dict")
        for i, g in enumerate(self.param_groups):  # names that no longer pair with params would load wrongly
            check_names(g, f"state_dict: parameter group {i}: ", ConfigError)
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        flag = getattr(self, "decoupled_weight_decay", None)  # Adam and AdamW record it, as torch's do
        flags = {} if flag is None else {"decoupled_weight_decay": flag}
        groups = [
            {
                **{k: v for k, v in g.items() if k not in ("params", "param_names")},
                **flags,
                "params": [index[id(p)] for p in g["params"]],
                **({"param_names": list(g["param_names"])} if "param_names" in g else {}),
            }
            for g in self.param_groups
        ]
        state = {index[id(p)]: copy.deepcopy(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore settings and buffers from ``state_dict()`` output (or a loaded checkpoint).

        Every setting is checked like the constructor's, every buffer against its parameter, and
        only then is anything changed.

        Raises:
            StateDictError: another number of groups or of parameters per group, unknown or repeated
                parameter indices, a setting out of range (the constructor's message), missing or
                unknown buffers, buffers of another shape, a non-float or narrower dtype, or non-finite values.
        """
        self.check_param_groups("load_state_dict")
        if not isinstance(state_dict, Mapping):
            raise StateDictError(
                f"optimizer state_dict must be a dict with 'state' and 'param_groups', got {type(state_dict).__name__}"
            )
        saved_groups, saved_state = state_dict.get("param_groups"), state_dict.get("state")
        if not isinstance(saved_groups, (list, tuple)) or not isinstance(saved_state, Mapping):
            raise StateDictError(
                "optimizer state_dict needs 'state' and 'param_groups' (a dict and a list), "
                f"got {type(saved_state).__name__} and {type(saved_groups).__name__}"
            )
        if len(saved_groups) != len(self.param_groups):
            raise StateDictError(
                f"loaded state dict has {len(saved_groups)} parameter groups, "
                f"this optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Parameter] = {}
        new_settings = []
        new_names: list[list[str] | None] = []  # torch keeps the saved names, or the current ones if none
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            where = f"parameter group {i}: "
            if not isinstance(saved, Mapping) or not isinstance(saved.get("params"), (list, tuple)):
                raise StateDictError(f"{where}expected a dict with a 'params' list of indices, got {saved!r:.80}")
            saved = saved_group(saved, getattr(self, "decoupled_weight_decay", None), type(self).__name__, where)
            saved = {**{k: v for k, v in LATER_SETTINGS.items() if k in self.defaults}, **saved}  # as torch fills them
            check_complete(saved, self.defaults, where, "the state dict", StateDictError)
            try:
                new_settings.append(self._check_group(saved, where))
            except ConfigError as exc:
                raise StateDictError(str(exc)) from None
            if len(saved["params"]) != len(group["params"]):
                raise StateDictError(
                    f"parameter group {i}: the state dict has {len(saved['params'])} parameters, "
                    f"this optimizer has {len(group['params'])}"
                )
            check_names(saved, where, StateDictError)
            names = saved.get("param_names")
            new_names.append(None if names is None else list(names))
            for k, p in zip(saved["params"], group["params"]):
                if saved_index(k, f"{where}'params' must list") in by_index:
                    raise StateDictError(f"{where}parameter index {int(k)} is listed twice; indices must be distinct")
                by_index[int(k)] = p
        new_state: dict[Parameter, dict[str, Any]] = {}
        for key, buffers in saved_state.items():
            if saved_index(key, f"state for parameter index {key!r}: 'state' must be keyed by") not in by_index:
                raise StateDictError(f"state for parameter index {key!r}, which no parameter group lists")
            param = by_index[int(key)]
            group_settings = next(
                s for s, g in zip(new_settings, self.param_groups) if any(q is param for q in g["params"])
            )
            what = f"state of parameter {key}"
            converted = converted_buffers(buffers, param.dtype, what)
            self._check_buffers(converted, param, group_settings, what, StateDictError)
            check_buffer_values(converted, what)
            new_state[param] = converted
        for group, settings, names in zip(self.param_groups, new_settings, new_names):
            group.update(settings)
            if names is not None:
                group["param_names"] = names
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join([*lines, ")"])
