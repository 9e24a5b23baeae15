"""A user's hand-written backward as the two callables ``check_backward`` takes.

Two shapes of user code:

- a function pair ``NAME_forward(x, W_query, W_key, W_value) -> (out, cache)`` and
  ``NAME_backward(d_out, cache) -> (dx, dW_query, dW_key, dW_value)``;
- an object (built from the user's class) with W_query, W_key, W_value, ``forward(x)`` (or
  ``__call__``) and ``backward(d_out)`` returning ``(dx, dW_query, dW_key, dW_value)``, or
  returning dx and leaving the weight gradients in ``.grad`` of npattn Parameters (or of a
  Linear's weight) or in attributes ``dW_query``/``dW_key``/``dW_value``.

Every call gets copies of x and the weights in float64, and runs with ``np.random`` seeded (the
check puts the global state back afterwards), so a dropout mask drawn from ``np.random`` is the same in
every forward: finite differences need a repeatable forward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from npattn._checks import from_tensor
from npattn.debug.backcheck import BackwardCheck, check_backward, describe_exception, recover_keep
from npattn.debug.backward import GRAD_NAMES, attention_reference
from npattn.debug.kept_inputs import edited_names
from npattn.debug.tolerance import matches
from npattn.errors import ConfigError
from npattn.nn import Module

__all__ = [
    "DROPOUT_P",
    "SEED",
    "dropout_check",
    "forward_of",
    "grads_of",
    "kept_random_state",
    "load_float64",
    "object_callables",
    "pair_callables",
    "pair_hint",
    "seeded",
]

SEED = 1234
DROPOUT_P = 0.2  # not 0.5, where 1/p and 1/(1 - p) coincide
WEIGHTS = GRAD_NAMES[1:]


def seeded(fn: Callable[..., Any], seed: int = SEED) -> Callable[..., Any]:
    """``fn`` run with ``np.random.seed(seed)`` first (wrap the whole check in ``kept_random_state``)."""

    def run(*args: Any) -> Any:
        np.random.seed(seed)
        return fn(*args)

    return run


@contextmanager
def kept_random_state() -> Iterator[None]:
    """Put NumPy's global random state back as it was, whatever the user's code and ``seeded`` did."""
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def _array(value: Any) -> Any:
    """A torch tensor as an ndarray; anything else, and a tensor NumPy cannot hold (on the meta
    device, ...), as it is: the checks that read it (``gradient_array``, ``returned_array``) report
    what it is, outside the user's code, so npattn's conversion is never blamed on it."""
    if all(callable(getattr(value, m, None)) for m in ("detach", "cpu", "numpy")):
        try:
            return from_tensor(value)
        except Exception:
            return value
    return value


def pair_hint(module: Any, name: str, path_text: str) -> str:
    """What to check instead when the function ``name`` has a sibling backward in ``module`` (it
    returns (output, cache) then): "" when it has none."""
    stem = name.removesuffix("_forward")
    if not callable(getattr(module, f"{stem}_backward", None)):
        return ""
    if stem != name:
        return f"check the pair by its stem: npattn check {path_text}:{stem} (it runs {name} with {stem}_backward)"
    return f"rename it {name}_forward, then check the pair by its stem: npattn check {path_text}:{name}"


def pair_callables(
    forward: Callable[..., Any], backward: Callable[..., Any], name: str
) -> tuple[Callable[..., np.ndarray], Callable[..., dict[str, Any]]]:
    """(forward(x, W) -> out, backward(x, W, G) -> grads) from NAME_forward and NAME_backward.

    Raises (inside the callables, reported by check_backward):
        ConfigError: NAME_forward does not return (out, cache); NAME_backward does not return four arrays.
    """

    def run_forward(x: np.ndarray, W: Mapping[str, np.ndarray]) -> tuple[np.ndarray, Any]:
        result = forward(x, *(W[n] for n in WEIGHTS))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise ConfigError(f"{name}_forward must return (out, cache), got {type(result).__name__}")
        return _array(result[0]), result[1]

    def run_backward(x: np.ndarray, W: Mapping[str, np.ndarray], G: np.ndarray) -> dict[str, Any]:
        given = {n: np.array(W[n], copy=True) for n in WEIGHTS}
        _, cache = run_forward(x, given)
        _refuse_edited(f"{name}_forward", given, W)
        result = backward(G, cache)
        _refuse_edited(f"{name}_backward (through its cache)", given, W)
        if not (isinstance(result, (tuple, list)) and len(result) == 4):
            got = f"{len(result)} values" if isinstance(result, (tuple, list)) else type(result).__name__
            raise ConfigError(f"{name}_backward must return (dx, dW_query, dW_key, dW_value), got {got}")
        return dict(zip(GRAD_NAMES, result))

    return (lambda x, W: run_forward(x, W)[0]), run_backward


def _refuse_edited(who: str, held: Mapping[str, Any], W: Mapping[str, np.ndarray]) -> None:
    """Raise when a weight ``who`` was given is no longer what it was: a backward that scaled
    W_query in place (through its cache) passed, its gradients right; on a model it changes the
    weights at every backward."""
    edited = edited_names(held, {n: W[n] for n in WEIGHTS})
    if edited:
        raise ConfigError(
            f"{who} changed the weight(s) {', '.join(edited)} in place: a forward or backward must leave the "
            "weights as they were (on a model it would change them at every call); compute into new arrays"
        )


def _weight_of(obj: Any, n: str) -> np.ndarray:
    """The (d_in, d_out) weight ``obj`` holds as ``n`` (a Linear's (d_out, d_in) weight transposed)."""
    holder = getattr(obj, n)
    if hasattr(holder, "weight") and not isinstance(holder, np.ndarray):
        return np.asarray(from_tensor(holder.weight.data)).T
    return np.asarray(from_tensor(getattr(holder, "data", holder)))


def load_float64(obj: Any, W: Mapping[str, np.ndarray]) -> None:
    """Put float64 copies of the (d_in, d_out) weights into the object's W_query, W_key, W_value
    (plain arrays, npattn Parameters, or Linear layers with (d_out, d_in) weights); an npattn
    Module is converted with ``to(float64)`` first (a module's parameters share one dtype)."""
    if isinstance(obj, Module):
        obj.to(np.float64)
    for n in WEIGHTS:
        holder = getattr(obj, n)
        if hasattr(holder, "weight") and not isinstance(holder, np.ndarray):  # a Linear
            holder.weight.data = np.array(W[n].T, dtype=np.float64)
        elif hasattr(holder, "data") and hasattr(holder, "grad") and not isinstance(holder, np.ndarray):
            holder.data = np.array(W[n], dtype=np.float64)
        else:
            setattr(obj, n, np.array(W[n], dtype=np.float64))


def _grad_holder(obj: Any, n: str) -> Any:
    holder = getattr(obj, n)
    if hasattr(holder, "weight") and not isinstance(holder, np.ndarray):
        return holder.weight
    return holder if hasattr(holder, "grad") and not isinstance(holder, np.ndarray) else None


def _clear_grads(obj: Any) -> None:
    """Zero Parameter grads and dW_* attributes (arrays a backward may accumulate into with +=;
    anything else is forgotten), so nothing stale is read after backward."""
    for n in WEIGHTS:
        holder = _grad_holder(obj, n)
        if holder is not None and getattr(holder, "grad", None) is not None:
            holder.grad = np.zeros_like(np.asarray(holder.data))
        if hasattr(obj, f"d{n}"):
            current = getattr(obj, f"d{n}")
            setattr(obj, f"d{n}", np.zeros_like(current) if isinstance(current, np.ndarray) else None)


def grads_of(obj: Any, result: Any, name: str) -> dict[str, Any]:
    """The four gradients after ``obj.backward``: its returned tuple, or dx plus .grad / dW_* attributes.

    Raises:
        ConfigError: a tuple that is not four values.
    """
    if isinstance(result, (tuple, list)):
        if len(result) != 4:
            raise ConfigError(
                f"{name}.backward must return (dx, dW_query, dW_key, dW_value) or dx, got {len(result)} values"
            )
        return dict(zip(GRAD_NAMES, result))
    grads: dict[str, Any] = {"x": result}
    for n in WEIGHTS:
        holder = _grad_holder(obj, n)
        if getattr(obj, f"d{n}", None) is not None:
            grads[n] = getattr(obj, f"d{n}")
        elif holder is not None and getattr(holder, "grad", None) is not None:
            grad = _array(holder.grad)
            linear = holder is not getattr(obj, n) and isinstance(grad, np.ndarray)
            grads[n] = grad.T if linear else grad  # a Linear's weight is (d_out, d_in)
        else:
            grads[n] = None
    return grads


def forward_of(obj: Any, name: str) -> Callable[..., Any]:
    """The object's ``forward`` (preferred, like the book's classes) or its ``__call__``.

    Raises:
        ConfigError: it has neither.
    """
    if callable(obj):
        return obj
    call = getattr(obj, "forward", None)
    if callable(call):
        return call
    raise ConfigError(f"{name} has no forward(x) and is not callable: expected a forward or __call__ taking x")


def object_callables(obj: Any, name: str) -> tuple[Callable[..., np.ndarray], Callable[..., dict[str, Any]]]:
    """(forward(x, W) -> out, backward(x, W, G) -> grads) from an object with forward and backward."""
    call = forward_of(obj, name)

    def run_forward(x: np.ndarray, W: Mapping[str, np.ndarray]) -> np.ndarray:
        load_float64(obj, W)
        return _array(call(x))

    def run_backward(x: np.ndarray, W: Mapping[str, np.ndarray], G: np.ndarray) -> dict[str, Any]:
        run_forward(x, W)
        _clear_grads(obj)
        grads = grads_of(obj, obj.backward(G), name)
        _refuse_edited(f"{name}.backward", {n: _weight_of(obj, n) for n in WEIGHTS}, W)
        return grads

    return run_forward, run_backward


def dropout_check(
    obj: Any, name: str, x: np.ndarray, weights: Mapping[str, np.ndarray], *, num_heads: int | None = None,
    backward_too: bool = True,
) -> tuple[BackwardCheck | None, str]:  # fmt: skip
    """The forward, and the backward unless ``backward_too`` is False (a class without one), of a
    causal class built with dropout=DROPOUT_P: (the check, "") or (None, why not, or that the
    forward-only check passed).

    The keep mask is recovered from the output (``recover_keep``); a forward that gives a
    different output on each call (its dropout does not draw from np.random) is not checked, and
    an output that no keep mask explains fails.
    """
    checked = "backward" if backward_too else "forward"
    title = f"5. {checked} with dropout={DROPOUT_P} (the keep mask read back from your output; np.random seeded)"
    forward, backward = (seeded(f) for f in object_callables(obj, name))
    x64 = np.array(x, dtype=np.float64)
    W64 = {n: np.array(weights[n], dtype=np.float64) for n in WEIGHTS}
    try:
        first, second = (np.asarray(forward(x64.copy(), W64)) for _ in range(2))
    except Exception as exc:
        error = describe_exception(f"{name}'s forward with dropout", exc)
        return BackwardCheck(title, error=error, forward_wrong=True), ""
    if first.dtype.kind not in "fiu":
        error = f"with dropout={DROPOUT_P} your forward returns an array of dtype {first.dtype}, expected real numbers"
        return BackwardCheck(title, error=error, forward_wrong=True), ""
    if first.shape != second.shape or not np.array_equal(first, second, equal_nan=True):
        return None, (
            f"5. dropout: not checked: with dropout={DROPOUT_P} your forward gives a different output on every call "
            "even with np.random seeded before each (draw the keep mask from np.random to have it checked)"
        )
    keep = recover_keep(first, x64, W64, DROPOUT_P, num_heads=num_heads)
    if keep is None and not backward_too and matches(first, attention_reference(x64, W64, causal=True,
                                                                                num_heads=num_heads)[0]):
        return None, f"5. dropout: not checked: with dropout={DROPOUT_P} your forward drops nothing (no dropout)"
    if keep is None:
        error = (
            f"with dropout={DROPOUT_P} your output is not correct attention for any keep mask: the forward's dropout "
            "is wrong (keep each attention weight with probability 1 - p and scale the kept ones by 1/(1 - p))"
        )
        return BackwardCheck(title, error=error, forward_wrong=True), ""
    if keep.all():
        return None, f"5. dropout: not checked: with dropout={DROPOUT_P} no attention weight was dropped"
    if not backward_too:
        return None, (
            f"5. forward with dropout={DROPOUT_P}: right (your output is correct attention for the keep mask read "
            f"back from it: {int(np.count_nonzero(~keep))} of {keep.size} weights dropped, the kept ones scaled by "
            f"1/(1 - p)); no backward to check"
        )
    settings: dict[str, Any] = {"causal": True, "num_heads": num_heads, "keep": keep, "p": DROPOUT_P}
    return check_backward(forward, backward, x64, W64, name=name, title=title, **settings), ""
