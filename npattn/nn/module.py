"""Parameter and Module: the parts of PyTorch's nn.Module that npattn needs, with the same names.

A Module registers every Parameter, buffer and sub-Module assigned to it as an attribute, in
assignment order, and offers ``parameters``, ``named_parameters`` (dotted names such as
``heads.0.W_query.weight``), ``state_dict``/``load_state_dict``, ``train``/``eval``,
``zero_grad``, ``to(dtype)`` and ``__call__ -> forward``. Unlike PyTorch there is no autograd:
each Module implements ``backward(grad_output)`` by hand, which returns the gradient with
respect to the input and *accumulates* into every Parameter's ``.grad``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from npattn._checks import as_array, check_float_dtype
from npattn.errors import BackwardError, StateDictError
from npattn.nn.functional import Recorder

__all__ = ["IncompatibleKeys", "Module", "ModuleList", "Parameter"]


class Parameter:
    """A trainable array: ``.data`` (ndarray) and ``.grad`` (same shape and dtype, starts at zero).

    Raises:
        DTypeError: data that is not real floating point (ints are converted to float64).
    """

    _data: np.ndarray

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        self.requires_grad = requires_grad
        self.data = data

    @property
    def data(self) -> np.ndarray:
        """The values, an ndarray; assigning a new array of another shape or dtype resets ``grad``."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if "_data" in self.__dict__ and value is self.__dict__["_data"]:  # ``p.data -= lr * p.grad``: in place
            return
        arr = as_array(value, "Parameter data")
        self._data = arr
        grad = getattr(self, "grad", None)
        if grad is None or grad.shape != arr.shape or grad.dtype != arr.dtype:
            self.grad = np.zeros_like(arr)

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


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns (PyTorch's ``_IncompatibleKeys``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer. Subclasses call ``super().__init__()`` first, then assign
    Parameters, buffers (``register_buffer``) and sub-Modules as attributes.

    Subclasses implement ``forward(x)`` and ``backward(grad_output)``.
    """

    training: bool
    _parameters: OrderedDict[str, Parameter]
    _buffers: OrderedDict[str, np.ndarray]
    _non_persistent: set[str]
    _modules: OrderedDict[str, Module]
    _cache: Any
    _recorder: Recorder | None

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_cache", None)
        object.__setattr__(self, "_recorder", None)

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() call")
        buffers, modules = self._buffers, self._modules
        if isinstance(value, Parameter):
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif name in params:
            raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} (npattn.Parameter expected)")
        elif name in modules:
            raise TypeError(f"cannot assign {type(value).__name__} as child module {name!r} (npattn.Module expected)")
        elif name in buffers:
            if not isinstance(value, np.ndarray):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (ndarray expected)")
            buffers[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            registry.pop(name, None)
        self._non_persistent.discard(name)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter) -> None:
        """Same as ``setattr(self, name, param)``."""
        if not isinstance(param, Parameter):
            raise TypeError(f"register_parameter expects an npattn.Parameter, got {type(param).__name__}")
        setattr(self, name, param)

    def register_buffer(self, name: str, tensor: np.ndarray, persistent: bool = True) -> None:
        """Register a non-trainable array (e.g. the causal ``mask``); in ``state_dict`` if persistent."""
        if not isinstance(tensor, np.ndarray):
            raise TypeError(f"buffer {name!r} must be an ndarray, got {type(tensor).__name__}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"attribute {name!r} already exists as a parameter or module")
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Module) -> None:
        """Same as ``setattr(self, name, module)``."""
        if not isinstance(module, Module):
            raise TypeError(f"add_module expects an npattn.Module, got {type(module).__name__}")
        setattr(self, name, module)

    # ------------------------------------------------------------------ traversal
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every descendant, depth first, each once, with dotted names."""
        seen: set[int] = set()

        def walk(module: Module, name: str) -> Iterator[tuple[str, Module]]:
            if id(module) in seen:
                return
            seen.add(id(module))
            yield name, module
            for child_name, child in module._modules.items():
                yield from walk(child, f"{name}.{child_name}" if name else child_name)

        yield from walk(self, prefix)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        yield from self._modules.values()

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted_name, Parameter)`` pairs in registration order, each Parameter once."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, param in module._parameters.items():
                if id(param) not in seen:
                    seen.add(id(param))
                    yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, np.ndarray]]:
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, buf in module._buffers.items():
                yield (f"{module_name}.{name}" if module_name else name), buf

    def buffers(self, recurse: bool = True) -> Iterator[np.ndarray]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    # ------------------------------------------------------------------ modes, grads, dtype
    def train(self, mode: bool = True) -> Module:
        """Set ``.training`` on this module and every descendant; returns self."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """``train(False)``: dropout becomes the identity."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Set every Parameter's ``.grad`` to zeros, in place (grads are never None in npattn)."""
        # A module without children owns all its parameters: no need to walk the tree.
        params = self.parameters() if self._modules else self._parameters.values()
        for param in params:
            param.grad.fill(0)

    def to(self, dtype: Any) -> Module:
        """Convert parameters, their grads and floating buffers to ``dtype`` (float32/float64); returns self.

        Raises:
            DTypeError: ``dtype`` is not a floating dtype.
        """
        dtype = check_float_dtype(dtype, "Module.to dtype")
        for param in self.parameters():
            grad = param.grad.astype(dtype)
            param.data = param.data.astype(dtype)
            param.grad = grad
        for module in self.modules():
            for name, buf in list(module._buffers.items()):
                if buf.dtype.kind == "f":
                    setattr(module, name, buf.astype(dtype))
            object.__setattr__(module, "_cache", None)
        return self

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    # ------------------------------------------------------------------ state dicts
    def _state_targets(self) -> OrderedDict[str, tuple[Module, str, np.ndarray]]:
        """name -> (owning module, attribute name, the live array) for every state_dict entry."""
        targets: OrderedDict[str, tuple[Module, str, np.ndarray]] = OrderedDict()
        seen: set[int] = set()
        for module_name, module in self.named_modules():
            dot = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if id(param) not in seen:
                    seen.add(id(param))
                    targets[dot + name] = (module, name, param.data)
            for name, buf in module._buffers.items():
                if name not in module._non_persistent:
                    targets[dot + name] = (module, name, buf)
        return targets

    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Name -> copy of every parameter and persistent buffer, in registration order."""
        return OrderedDict((name, arr.copy()) for name, (_, _, arr) in self._state_targets().items())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the existing parameters and buffers, keeping their dtype.

        Everything is checked before anything is copied, so a failed load changes nothing.

        Raises:
            StateDictError: with ``strict``, missing or unexpected keys; always, shape mismatches,
                non-numeric values, non-finite values in floating parameters, values that would
                overflow the parameter's dtype (e.g. 1e300 into float32) and values other than 0/1
                for bool buffers (all listed at once).
        """
        if not isinstance(state_dict, Mapping):
            raise StateDictError(f"load_state_dict expects a mapping of name -> array, got {type(state_dict).__name__}")
        targets = self._state_targets()
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        problems: list[str] = []
        if strict and missing:
            problems.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if strict and unexpected:
            problems.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        ready: list[tuple[np.ndarray, np.ndarray]] = []
        for key, (_, _, target) in targets.items():
            if key not in state_dict:
                continue
            try:
                value = as_array(state_dict[key], key)
            except (TypeError, ValueError) as exc:
                problems.append(f"bad value for {exc}")  # exc names the key
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
            if target.dtype.kind == "f":
                problem = _nonfinite_problem(key, value, target.dtype)
                if problem:
                    problems.append(problem)
                    continue
            ready.append((target, value))
        if problems:
            raise StateDictError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(problems)
            )
        for target, value in ready:
            np.copyto(target, value, casting="unsafe")
        for module in self.modules():
            object.__setattr__(module, "_cache", None)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ forward / backward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def backward(self, grad_output: Any) -> Any:
        """Gradient w.r.t. the last forward's input; accumulates into every Parameter's ``.grad``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement backward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def _saved(self) -> Any:
        """The cache of the last forward; raises BackwardError if there was none."""
        if self._cache is None:
            raise BackwardError(
                f"{type(self).__name__}.backward() called before forward(): run a forward pass first "
                "(forward stores what backward needs)"
            )
        return self._cache

    def _record(self) -> Recorder | None:
        """The stage recorder installed by ``npattn.trace`` (None when not tracing)."""
        return self._recorder

    # ------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        """Constructor arguments shown in the first line of repr (override in subclasses)."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): Parameter(shape={p.shape}, dtype={p.dtype})" for name, p in self._parameters.items()]
        lines += [f"({name}): buffer(shape={b.shape}, dtype={b.dtype})" for name, b in self._buffers.items()]
        for name, child in self._modules.items():
            lines.append(f"({name}): " + repr(child).replace("\n", "\n  "))
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _nonfinite_problem(key: str, value: np.ndarray, dtype: np.dtype) -> str:
    """Why ``value`` cannot go into a floating parameter of ``dtype`` ("" if it can)."""
    bad = int(value.size - np.count_nonzero(np.isfinite(value)))
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


class ModuleList(Module):
    """Holds sub-Modules in a list, registered as ``"0"``, ``"1"``, ... (``nn.ModuleList``)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for module in modules or ():
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())
