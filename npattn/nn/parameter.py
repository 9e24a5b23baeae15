"""Parameter: a trainable array and its gradient (``torch.nn.Parameter``'s place in npattn).

``.data`` is the array, ``.grad`` the gradient every backward accumulates into (same shape and
dtype; None when frozen). ``npattn.nn.module`` re-exports it next to Module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from npattn._checks import as_array, check_bool, plain
from npattn.errors import DTypeError, ShapeError

__all__ = ["Parameter", "check_specs", "nonfinite_problem", "shared_grads", "zero_grads"]


class Parameter:
    """A trainable array: ``.data`` (ndarray) and ``.grad`` (same shape and dtype, starts at zero).

    ``requires_grad=False`` freezes it, as in PyTorch: ``.grad`` is None, backward passes leave
    it alone and optimizers skip it (``requires_grad_()`` and ``Module.requires_grad_()`` switch).

    ``.grad`` of a trainable Parameter may be set to None (``backward`` then starts it from zeros,
    like PyTorch; ``zero_grad`` leaves it None) or to an array of the data's shape and dtype;
    ``backward`` refuses anything else before it changes any gradient, and so a ``.grad`` that
    shares memory with another ``.grad`` or with a parameter's ``.data`` (``shared_grads``).

    Raises:
        DTypeError: data that is not real floating point (ints are converted to float64).
        ConfigError: requires_grad that is not a bool.
    """

    _grad: Any
    _converted: str | None  # the type of the last .data assigned, when it was not an ndarray

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        self._requires_grad = check_bool(requires_grad, "requires_grad")
        self.grad = None
        self.data = data

    @property
    def data(self) -> np.ndarray:
        """The values, an ndarray; assigning a new array of another shape or dtype resets ``grad``."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        grad, current = self.grad, self.__dict__.get("_data")
        if value is current and isinstance(grad, np.ndarray) and isinstance(current, np.ndarray):
            if grad.shape == current.shape and grad.dtype == current.dtype:  # ``p.data -= step``: the same array back
                return
        arr = as_array(value, "Parameter data")
        self._data = arr
        self._converted = None if isinstance(value, np.ndarray) else type(value).__name__  # for check_specs
        grad = self.grad
        if self._requires_grad and (
            not isinstance(grad, np.ndarray) or grad.shape != arr.shape or grad.dtype != arr.dtype
        ):
            self.grad = np.zeros_like(arr)

    @property
    def grad(self) -> Any:
        """The gradient backward accumulates: None or an ndarray (an ndarray subclass assigned,
        such as np.matrix, is kept as its base ndarray, ``_checks.plain``; anything else is kept as
        given and refused by backward and the optimizers)."""
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        if type(value) is not np.ndarray and isinstance(value, np.ndarray):  # an exact ndarray: as it is
            value = plain(value, "Parameter grad")
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        """Whether backward accumulates into ``.grad`` (False: frozen, ``.grad`` is None)."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._requires_grad = check_bool(value, "requires_grad")
        self.grad = np.zeros_like(self._data) if self._requires_grad else None

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """Set ``requires_grad`` in place (``tensor.requires_grad_``); returns self."""
        self.requires_grad = requires_grad
        return self

    def accumulate_grad(self, grad: np.ndarray) -> None:
        """``.grad += grad`` (what every backward does with a parameter's gradient); nothing
        when frozen, even if ``.grad`` was set to an array (PyTorch leaves a frozen ``.grad`` alone)."""
        if self._requires_grad and self.grad is not None:
            self.grad += grad

    def numel(self) -> int:
        """The number of elements (``tensor.numel()``), e.g. for counting a model's parameters."""
        return int(self._data.size)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    def numpy(self) -> np.ndarray:
        """The data array itself (not a copy), like ``tensor.detach().numpy()``."""
        return self._data

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is None:
            return self._data if not copy else self._data.copy()
        return self._data.astype(dtype)

    def __repr__(self) -> str:
        body = np.array2string(self._data, precision=4, suppress_small=True)
        return f"Parameter(shape={self.shape}, dtype={self.dtype}):\n{body}"


def shared_grads(params: Iterable[Parameter]) -> list[tuple[Parameter, Parameter, str]]:
    """Every ``(p, q, what)`` where ``p``'s ``.grad`` shares memory with ``q``'s ``.grad``
    (``what`` = "grad") or ``q``'s ``.data`` ("data"; ``q`` may be ``p``): accumulating into it would
    give both gradients the sum, or change a weight. Arrays are grouped by the buffer they view
    (``.base``), so only arrays over one buffer are compared (exactly, ``np.shares_memory``).
    """
    params = list({id(p): p for p in params}.values())
    buffers = [id(p._data if p._data.base is None else p._data.base) for p in params]
    grads = [p.grad for p in params if type(p.grad) is np.ndarray]
    buffers += [id(g if g.base is None else g.base) for g in grads]
    if len(set(buffers)) == len(buffers):
        return []  # the common case: every array over a buffer of its own
    arrays: dict[int, list[tuple[np.ndarray, Parameter, str]]] = {}
    for p in params:
        entries = [(p._data, "data")] + ([(p.grad, "grad")] if type(p.grad) is np.ndarray else [])
        for a, what in entries:
            arrays.setdefault(id(a if a.base is None else a.base), []).append((a, p, what))
    found = []
    for group in arrays.values():
        for i, (a, p, what) in enumerate(group):
            if what == "grad":
                found += [
                    (p, q, other)
                    for j, (b, q, other) in enumerate(group)
                    if (other == "data" or j > i) and np.shares_memory(a, b)
                ]
    return found


def zero_grads(params: Iterable[Parameter], set_to_none: Any = False) -> None:
    """``zero_grad`` of modules and optimizers: every ``.grad`` that is not None becomes zeros, in
    place when it is a writeable array of its parameter's shape and dtype that shares no memory
    with another ``.grad`` or a weight (zeroing it would zero those too), else a new zeros array;
    ``set_to_none=True`` sets every ``.grad`` to None instead (PyTorch's keyword).

    Raises:
        ConfigError: set_to_none not a bool.
    """
    set_to_none = check_bool(set_to_none, "set_to_none")
    params = list(params)
    shared = set() if set_to_none else {id(p) for p, _, _ in shared_grads(params)}
    for param in params:
        g, data = param.grad, param._data
        if g is None or set_to_none:
            param.grad = None
        elif type(g) is np.ndarray and g.shape == data.shape and g.dtype == data.dtype and g.flags.writeable:
            if id(param) in shared:
                param.grad = np.zeros_like(data)
            else:
                g[...] = 0
        else:
            param.grad = np.zeros_like(data)


def check_specs(module: Any) -> None:
    """Every Parameter of ``module`` and its submodules still has the shape and dtype it was
    registered with (``Module.to`` changes the dtype of all of them): a ``.data`` replaced with
    another shape would be split, broadcast or multiplied into a wrong answer. One tuple compare
    per parameter, before every forward (``Module.__call__``).

    Raises:
        ShapeError, DTypeError: naming the parameter, the expected and the actual shape or dtype; a
            parameter whose dtype differs from the others' (a submodule of another dtype).
    """
    first = None
    for m in module.modules() if module._modules else (module,):
        specs = m._specs
        for name, p in m._parameters.items():
            data = p._data
            spec = specs[name]
            if data.shape != spec[0] or (data.dtype is not spec[1] and data.dtype != spec[1]):
                _spec_error(module, m, name, p, *spec)
            if first is None:
                first = (m, name, data.dtype)
            elif data.dtype is not first[2] and data.dtype != first[2]:  # a submodule of another dtype
                _mixed_error(module, first, m, name, data.dtype)


def _mixed_error(module: Any, first: tuple[Any, str, np.dtype], owner: Any, name: str, dtype: np.dtype) -> None:
    def full(sub: Any, leaf: str) -> str:
        prefix = next(n for n, s in module.named_modules() if s is sub)
        return f"{prefix}.{leaf}" if prefix else leaf

    raise DTypeError(
        f"{type(module).__name__}: parameter {full(owner, name)} has dtype {dtype}, but {full(first[0], first[1])} "
        f"has {first[2]}; a module computes in one dtype: convert the whole module with .to({first[2]}) (or "
        f"build the submodule with dtype={first[2]})"
    )


def _spec_error(module: Any, owner: Any, name: str, param: Parameter, shape: tuple, dtype: np.dtype) -> None:
    data = param._data
    prefix = next(n for n, sub in module.named_modules() if sub is owner)
    full = f"{prefix}.{name}" if prefix else name
    where = f"{type(module).__name__}: parameter {full}"
    if data.shape != shape:
        raise ShapeError(
            f"{where} has shape {data.shape}, expected {shape} (the shape the module was built with); "
            f"assign .data an array of shape {shape}, or build a new module for other sizes"
        )
    if getattr(param, "_converted", None):  # a list or a number, which NumPy turned into an array of its own dtype
        raise DTypeError(
            f"{where} was assigned a {param._converted}, which NumPy converted to {data.dtype}; expected "
            f"{dtype} (the module's dtype): assign an array of that dtype, e.g. np.asarray(value, dtype=np.{dtype})"
        )
    raise DTypeError(
        f"{where} has dtype {data.dtype}, expected {dtype} like the module's other parameters; "
        f"convert the whole module with .to({data.dtype.name}) instead of one parameter"
    )


def nonfinite_problem(key: str, value: np.ndarray, dtype: np.dtype, only_overflow: bool = False) -> str:
    """Why ``value`` cannot go into a floating parameter of ``dtype`` ("" if it can)."""
    bad = int(value.size - np.count_nonzero(np.isfinite(value)))
    if bad and only_overflow:
        return ""  # already non-finite: converting cannot make it worse
    if bad:
        return f"non-finite values in {key}: {bad} of {value.size} entries are NaN or inf."
    with np.errstate(over="ignore"):
        bad = int(value.size - np.count_nonzero(np.isfinite(value.astype(dtype))))
    if bad:
        return (
            f"values out of range in {key}: {bad} of {value.size} entries overflow {dtype} "
            f"(largest magnitude {np.max(np.abs(value)):.3g})."
        )
    return ""

