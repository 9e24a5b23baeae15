"""What a backward returned, before any comparison: one real array per checked input, in a tuple.
A complex, boolean, string or object gradient is refused, never converted (a complex gradient's
imaginary part would be dropped with only NumPy's ComplexWarning)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from npattn._checks import from_tensor
from npattn.errors import ConfigError, GradcheckError


def _gradient(value: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The gradient of ``name`` as float64, when it is a real array (or a number, a torch tensor).

    Raises:
        GradcheckError: missing (None), not an array, or not real numbers (complex, booleans,
            strings, objects), naming the tensor and what it got.
    """
    expected = f"expected real numbers of shape {shape} ({name}'s shape)"
    if value is None:
        raise GradcheckError(f"the backward's gradient of {name} is missing (None), {expected}")
    try:
        arr = np.asarray(from_tensor(value))
    except Exception as exc:  # a ragged list, an object that refuses to be an array
        raise GradcheckError(
            f"the backward's gradient of {name} is not an array ({type(value).__name__}: {type(exc).__name__}), "
            f"{expected}"
        ) from None
    if arr.dtype == object and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in arr.flat
    ):
        arr = arr.astype(np.float64)  # an object array of real numbers (bools are ints: refused below)
    kind = arr.dtype.kind
    if kind == "c":
        problem = f"complex ({arr.dtype}): a gradient of a real loss is real"
    elif kind in "US":
        problem = f"strings ({arr.dtype})"
    elif kind == "b":
        problem = "booleans (bool)"
    elif kind not in "fiu":
        problem = f"not a numeric array ({type(value).__name__} of dtype {arr.dtype})"
    else:
        return np.asarray(arr, dtype=np.float64)
    raise GradcheckError(f"the backward's gradient of {name} is {problem}, {expected}")


def _match_gradients(
    grads: Any,
    forward: Callable[..., Any],
    inputs: Sequence[Any],
    arrays: Sequence[np.ndarray],
    names: Sequence[str],
    given: list[int],
    floats: list[int],
    unchecked: dict[int, str],
) -> list[int]:
    """The inputs whose gradients are checked, in the order the backward returned them: every
    input (one gradient per input, those of ``unchecked`` ignored), every checked input, or the
    inputs floating-point as given (an integer input the forward accepts as floats then has no
    gradient: named in the report as not checked).

    Raises:
        ConfigError: ``grads`` is not a tuple (a bare ndarray); a number passed as an input that the
            backward gives no gradient for (it belongs in ``kwargs``).
        GradcheckError: another count of gradients (the backward is wrong).
    """
    n = len(arrays)
    if not isinstance(grads, (list, tuple)):
        raise ConfigError(
            f"gradcheck_stage: the backward must return a tuple (one gradient per input, here {n}), "
            f"got {type(grads).__name__}; a single gradient is returned as (grad,)"
        )
    k = len(grads)
    if k in (n, len(floats)):
        return floats
    if given and k == len(given):
        return given
    numbers = [i for i in floats if np.ndim(inputs[i]) == 0]
    if numbers and k == len(floats) - len(numbers):
        params = _parameter_names(forward)
        said = ", ".join(f"{names[i]} ({_number(inputs[i])})" for i in numbers)
        how = "kwargs= (a dict of the forward's keyword arguments)"
        if len(params) > max(numbers):
            how = "kwargs={" + ", ".join(f"{params[i]!r}: {_number(inputs[i])}" for i in numbers) + "}"
        raise ConfigError(
            f"gradcheck_stage: {said} is a number the backward gives no gradient for (it returned {k} gradient"
            f"{'s' * (k != 1)} for {n} inputs): pass such arguments through {how}, not as inputs"
        )
    skipped = f", or one per checked input ({len(floats)})" if len(floats) != n else ""
    raise GradcheckError(f"backward returned {k} gradients for {n} inputs (expected one gradient per input{skipped})")


def _number(value: Any) -> str:
    return f"{np.asarray(from_tensor(value)).item()!r}"


def _parameter_names(forward: Callable[..., Any]) -> list[str]:
    """The forward's positional parameter names ([] when they cannot be read)."""
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
