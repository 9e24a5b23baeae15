"""State dicts: the name -> array map behind ``Module.state_dict``, ``load_state_dict`` and
``to``, the checked load (everything checked before anything is copied) and ``IncompatibleKeys``;
the ``Module`` methods that call them are in :mod:`npattn.nn.module`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from npattn._checks import as_array, check_bool
from npattn.errors import StateDictError
from npattn.nn.parameter import nonfinite_problem

__all__ = ["IncompatibleKeys", "load_state", "state_targets"]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns (PyTorch's ``_IncompatibleKeys``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def state_targets(module: Any) -> OrderedDict[str, tuple[Any, str, np.ndarray]]:
    """name -> (owning module, attribute name, the live array) for every state_dict entry of the
    Module ``module``: its parameters, then its persistent buffers, module by module. A Parameter
    shared by two modules (tied weights, ``out_head.weight = tok_emb.weight``) has an entry under
    each name, as in PyTorch's ``state_dict``."""
    targets: OrderedDict[str, tuple[Any, str, np.ndarray]] = OrderedDict()
    for module_name, sub in module.named_modules():
        dot = f"{module_name}." if module_name else ""
        for name, param in sub._parameters.items():
            targets[dot + name] = (sub, name, param.data)
        for name, buf in sub._buffers.items():
            if name not in sub._non_persistent:
                targets[dot + name] = (sub, name, buf)
    return targets


def load_state(module: Any, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
    """Copy ``state_dict``'s values into the Module ``module``'s parameters and buffers, keeping
    their dtype, after checking every value (see ``Module.load_state_dict``, which also discards
    the last forward). Raises StateDictError or ConfigError and changes nothing on a bad value."""
    if not isinstance(state_dict, Mapping):
        raise StateDictError(f"load_state_dict expects a mapping of name -> array, got {type(state_dict).__name__}")
    strict = check_bool(strict, "strict")
    targets = state_targets(module)
    first_key: dict[int, str] = {}  # id of a live array -> the first key naming it
    for key, (_, _, target) in targets.items():
        if key in state_dict:
            first_key.setdefault(id(target), key)
    # A tied parameter is fully given by any one of its names (files written before its other names
    # were saved have one); it is missing only when none of them is in the state dict.
    missing = [k for k, (_, _, t) in targets.items() if k not in state_dict and id(t) not in first_key]
    unexpected = [k for k in state_dict if k not in targets]
    problems: list[str] = []
    if strict and missing:
        problems.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
    if strict and unexpected:
        problems.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
    ready: list[tuple[np.ndarray, np.ndarray]] = []
    for key, (owner, name, target) in targets.items():
        if key not in state_dict:
            continue
        twin = first_key[id(target)]
        if twin != key:  # a tied parameter's second name: the same values or a refusal, never the last one
            try:
                a, b = as_array(state_dict[key], key), as_array(state_dict[twin], twin)
                same = np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc")
            except (TypeError, ValueError):
                same = False
            if not same:
                problems.append(
                    f"{key} and {twin} name one tied parameter in the current model but hold different "
                    "values in the state_dict (or one is not a numeric array)."
                )
            continue
        try:
            value = as_array(state_dict[key], key)
        except (TypeError, ValueError) as exc:
            problems.append(f"bad value for {exc}")  # exc names the key
            continue
        if not target.flags.writeable:
            problems.append(f"{key} is read-only in the current model (its array's flags.writeable is False).")
            continue
        if value.shape != target.shape:
            problems.append(
                f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                f"the shape in current model is {target.shape}."
            )
            continue
        if target.dtype == bool and not np.all((value == 0) | (value == 1)):
            # A bool buffer (the causal mask) takes bools or 0/1 numbers: the book saves its mask as floats.
            problems.append(
                f"non-boolean values in {key}: expected True/False or 0/1, got values such as "
                f"{value[(value != 0) & (value != 1)].flat[0]}."
            )
            continue
        causal = name in owner._causal_buffers  # the book's mask: True (or 1) above the diagonal
        if causal and not np.array_equal(value != 0, np.triu(np.ones(value.shape, bool), 1)):
            problems.append(f"{key} is not the book's causal mask: expected True (or 1) only above the diagonal.")
            continue
        if target.dtype.kind == "f":
            problem = nonfinite_problem(key, value, target.dtype)
            if problem:
                problems.append(problem)
                continue
        ready.append((target, value))
    if problems:
        raise StateDictError(
            f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(problems)
        )
    for target, value in ready:
        np.copyto(target, value, casting="unsafe")
    return IncompatibleKeys(missing, unexpected)
