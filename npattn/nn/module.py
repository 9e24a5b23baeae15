"""Parameter and Module: the parts of PyTorch's nn.Module that npattn needs, with the same names.

A Module registers every Parameter, buffer and sub-Module assigned to it as an attribute, in assignment order, and
offers ``parameters``, ``named_parameters`` (dotted names such as ``heads.0.W_query.weight``), ``state_dict``/
``load_state_dict``, ``train``/``eval``, ``zero_grad``, ``requires_grad_``, ``to(dtype)``/``to("cpu")`` and
``__call__ -> forward`` (``ModuleList``, ``Sequential``: :mod:`npattn.nn.sequential`). Unlike PyTorch there is no
autograd: each Module implements ``backward(grad_output)`` by hand, which returns the gradient with respect to the
input and *accumulates* into every Parameter's ``.grad`` (state-dict checks: :mod:`npattn.nn.state_dict`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from npattn._checks import check_bool, check_float_dtype, device_name, grad_problem, overlaps_itself, plain
from npattn.errors import BackwardError, ConfigError, DTypeError
from npattn.nn.functional import Recorder
from npattn.nn.parameter import Parameter, check_specs, nonfinite_problem, shared_grads, zero_grads
from npattn.nn.passes import CALLS, PASSES, check_no_later_forward, route_forward
from npattn.nn.state_dict import IncompatibleKeys, load_state, state_targets

__all__ = ["IncompatibleKeys", "Module", "Parameter"]


class Module:
    """Base class of every layer. Subclasses call ``super().__init__()`` first, then assign
    Parameters, buffers (``register_buffer``) and sub-Modules as attributes.

    Subclasses implement ``forward(x)`` and ``backward(grad_output)``.
    """

    training: bool
    _parameters: OrderedDict[str, Parameter]
    _specs: dict[str, tuple[tuple[int, ...], np.dtype]]
    _buffers: OrderedDict[str, np.ndarray]
    _non_persistent: set[str]
    _causal_buffers: frozenset[str] = frozenset()  # buffers that must hold the book's causal mask
    _modules: OrderedDict[str, Module]
    _cache: Any
    _recorder: Recorder | None
    _forward_count: int
    _outer_call: int  # the number of the outermost call this module's last forward ran in
    _repeated: str  # the outermost module, if this one ran more than once in it (its cache holds the last use only)
    _members: tuple[tuple[tuple[str, Any], ...], ...] | None  # what the last forward used (None: not called yet)
    _reads_children_parameters = False
    """True for a module whose forward computes with its submodules' parameters without calling them
    (a fused projection reading its Linear layers' weights): backward then checks those too."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_specs", {})
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_cache", None)
        object.__setattr__(self, "_recorder", None)
        object.__setattr__(self, "_forward_count", 0)
        object.__setattr__(self, "_outer_call", 0)
        object.__setattr__(self, "_repeated", "")
        object.__setattr__(self, "_members", None)

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() call")
        buffers, modules = self._buffers, self._modules
        if isinstance(value, (Parameter, Module)) and (not name or "." in name):  # state_dict joins names with '.'
            raise ConfigError(f"a parameter or module name must be non-empty and without '.', got {name!r}")
        if isinstance(value, Parameter):
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
            self._specs.setdefault(name, (value._data.shape, value._data.dtype))
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif name in params:
            raise DTypeError(f"cannot assign {type(value).__name__} as parameter {name!r} (npattn.Parameter expected)")
        elif name in modules:
            raise DTypeError(f"cannot assign {type(value).__name__} as child module {name!r} (npattn.Module expected)")
        elif name in buffers:
            if not isinstance(value, np.ndarray):
                raise DTypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (ndarray expected)")
            buffers[name] = value = plain(value, f"buffer {name!r}")  # np.matrix: its base ndarray
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules, self._specs):
            registry.pop(name, None)
        self._non_persistent.discard(name)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter) -> None:
        """Same as ``setattr(self, name, param)``."""
        if not isinstance(param, Parameter):
            raise DTypeError(f"register_parameter expects an npattn.Parameter, got {type(param).__name__}")
        setattr(self, name, param)

    def register_buffer(self, name: str, tensor: np.ndarray, persistent: bool = True) -> None:
        """Register a non-trainable array (e.g. the causal ``mask``); in ``state_dict`` if persistent."""
        if not isinstance(name, str) or not name or "." in name:
            raise ConfigError(f"buffer name must be a non-empty string without '.', got {name!r}")
        if not isinstance(tensor, np.ndarray):
            raise DTypeError(f"buffer {name!r} must be an ndarray, got {type(tensor).__name__}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"attribute {name!r} already exists as a parameter or module")
        self._buffers[name] = tensor = plain(tensor, f"buffer {name!r}")
        if not persistent:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Module) -> None:
        """Same as ``setattr(self, name, module)``."""
        if not isinstance(module, Module):
            raise ConfigError(f"add_module expects an npattn.Module, got {type(module).__name__}")
        setattr(self, name, module)

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

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """``fn(module)`` for every submodule, children first, then this one (``nn.Module.apply``,
        e.g. for a weight init); returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

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
        mode = check_bool(mode, "train mode")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """``train(False)``: dropout becomes the identity."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Set every trainable Parameter's ``.grad`` to zeros: in place when it is a writeable array
        of the parameter's shape and dtype that shares no memory with another ``.grad`` or a weight,
        a new zeros array otherwise; a ``.grad`` of None stays None (a frozen Parameter's, or one
        set to None, which backward starts from zeros). ``set_to_none=True`` (PyTorch's keyword and
        default) sets every ``.grad`` to None instead; npattn's default stays False (zeros)."""
        # A module without children owns all its parameters: no need to walk the tree.
        zero_grads(self.parameters() if self._modules else self._parameters.values(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze (True) every Parameter (``Module.requires_grad_``); returns self."""
        for param in self.parameters():
            param.requires_grad = requires_grad
        return self

    def to(self, *args: Any, device: Any = None, dtype: Any = None, non_blocking: bool = False) -> Module:
        """Convert parameters, their grads and floating buffers to a floating dtype (float16, float32, float64); a
        device ``"cpu"`` (``torch.device("cpu")`` too) is accepted and changes nothing, since npattn
        runs on the CPU. PyTorch's forms: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(device=..., dtype=...)``, ``to(tensor)`` (a tensor's or array's dtype and device);
        ``non_blocking`` is accepted (a CPU copy is done when the call returns). Returns self.

        One rule for the last forward: a call that changes nothing (the CPU, the dtype every
        floating array already has) keeps the arrays and the forward, so ``backward`` still works;
        a call that changes a dtype discards the forward (``backward`` then raises BackwardError).

        Raises:
            DTypeError: not a floating dtype (nor a device).
            ConfigError: a device other than the CPU ("cuda", "mps", ...); more than one device or
                dtype.
        """
        devices, dtypes = [device] if device is not None else [], [dtype] if dtype is not None else []
        check_bool(non_blocking, "Module.to non_blocking")
        for arg in args:
            if not isinstance(arg, (type, np.dtype)) and hasattr(arg, "shape") and hasattr(arg, "dtype"):  # to(tensor)
                dtypes.append(arg.dtype)
                devices += [arg.device] if getattr(arg, "device", None) is not None else []
                continue
            (devices if device_name(arg) is not None else dtypes).append(arg)
        if len(devices) > 1 or len(dtypes) > 1 or not devices + dtypes:
            raise ConfigError(
                f"Module.to takes one device and/or one dtype, got {args!r} device={device!r} dtype={dtype!r}"
            )
        for name in (device_name(d) or str(d) for d in devices):
            if name.split(":")[0] != "cpu":
                raise ConfigError(
                    f"npattn runs on the CPU only: Module.to accepts 'cpu' or a float dtype, got device {name!r}"
                )
        if not dtypes:
            return self
        dtype = check_float_dtype(dtypes[0], "Module.to dtype")
        floating = [(name, arr) for name, (_, _, arr) in self._state_targets().items() if arr.dtype.kind == "f"]
        params = list(self.named_parameters())
        grads = [(f"{name}.grad", p.grad) for name, p in params if isinstance(p.grad, np.ndarray)]
        if all(arr.dtype == dtype for _, arr in floating + grads):
            return self  # nothing to change: the same arrays, and the last forward stays usable
        too_large = [
            problem
            for name, arr in floating + grads
            if (problem := nonfinite_problem(name, arr, dtype, only_overflow=True))
        ]
        if too_large:  # checked before anything is converted: a refused call changes nothing
            raise DTypeError(f"Module.to({dtype}) would turn finite values into inf: " + " ".join(too_large))
        for _, param in params:
            grad = param.grad.astype(dtype) if isinstance(param.grad, np.ndarray) else None
            param.data = param.data.astype(dtype)
            param.grad = grad
        for module in self.modules():
            module._specs.update((n, (p._data.shape, dtype)) for n, p in module._parameters.items())
            for name, buf in list(module._buffers.items()):
                if buf.dtype.kind == "f":
                    setattr(module, name, buf.astype(dtype))
            object.__setattr__(module, "_cache", _DISCARDED_BY_TO)
        return self

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    def half(self) -> Module:
        return self.to(np.float16)

    def cpu(self) -> Module:  # self: npattn runs on the CPU
        return self

    def cuda(self, device: Any = None) -> Module:
        """Raises ConfigError, as ``to("cuda")`` does: npattn runs on the CPU only."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def _state_targets(self) -> OrderedDict[str, tuple[Module, str, np.ndarray]]:
        """name -> (owning module, attribute name, the live array) for every state_dict entry."""
        return state_targets(self)

    def state_dict(
        self, *, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict[str, np.ndarray]:
        """Name -> copy of every parameter and persistent buffer, in registration order. A tied
        Parameter's names share one copy, as torch's state dict shares one tensor. As torch's:
        ``prefix`` goes before every name, ``destination`` (a dict) is filled and returned, and
        ``keep_vars=True`` gives the live arrays themselves (editing them edits the model).

        Raises:
            ConfigError: ``prefix`` not a str, ``keep_vars`` not a bool, ``destination`` not a dict.
        """
        if not isinstance(prefix, str):
            raise ConfigError(f"state_dict: prefix must be a str, got {type(prefix).__name__}")
        keep_vars = check_bool(keep_vars, "state_dict: keep_vars")
        if destination is not None and not isinstance(destination, dict):
            raise ConfigError(f"state_dict: destination must be a dict, got {type(destination).__name__}")
        copies: dict[int, np.ndarray] = {}
        state: Any = OrderedDict() if destination is None else destination
        for name, (_, _, arr) in self._state_targets().items():
            if id(arr) not in copies:
                copies[id(arr)] = arr if keep_vars else arr.copy()
            state[prefix + name] = copies[id(arr)]
        return state

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> IncompatibleKeys:
        """Copy values into the existing parameters and buffers, keeping their dtype (torch's
        ``assign=False``; ``assign=True``, which would make the given arrays the parameters, is a
        ConfigError).

        Everything is checked before anything is copied, so a failed load changes nothing.

        Raises:
            StateDictError: with ``strict``, missing or unexpected keys; always, shape mismatches,
                non-numeric values, non-finite values in floating parameters, values that would
                overflow the parameter's dtype (e.g. 1e300 into float32), values other than 0/1
                for bool buffers, a causal ``mask`` other than the book's and read-only parameter or
                buffer arrays (all listed at once).
            ConfigError: ``strict`` or ``assign`` not a bool; ``assign=True``.
        """
        if check_bool(assign, "load_state_dict: assign"):
            raise ConfigError(
                "load_state_dict(assign=True) is not supported: npattn copies the values into the existing "
                "parameters and buffers (assign=False), keeping their dtype and every reference to them"
            )
        keys = load_state(self, state_dict, strict)
        for module in self.modules():
            object.__setattr__(module, "_cache", _DISCARDED_BY_LOAD)
        return keys

    # ------------------------------------------------------------------ forward / backward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def backward(self, grad_output: Any) -> Any:
        """Gradient w.r.t. the last forward's input; accumulates into every Parameter's ``.grad``.

        Runs ``_gradients`` (which changes nothing), then ``_accumulate``: every ``.grad`` is
        checked before any is changed, so a backward that fails changes no gradient.

        Raises:
            BackwardError: no forward to differentiate; a ``.grad`` that is not None or a writeable
                array of its parameter's shape and dtype (nothing accumulated).
            ShapeError, DTypeError: ``grad_output`` of the wrong shape or kind.
        """
        dx, grads = self._gradients(grad_output)
        self._accumulate(grads)
        return dx

    def _gradients(self, grad_output: Any) -> tuple[Any, list[tuple[Parameter, np.ndarray]]]:
        """The gradient w.r.t. the input and ``[(parameter, its gradient), ...]``; changes nothing."""
        raise NotImplementedError(f"{type(self).__name__} does not implement backward()")

    @staticmethod
    def _child_gradients(child: Module, grad_output: Any, grads: list[tuple[Parameter, np.ndarray]]) -> Any:
        """``child``'s input gradient, its parameters' gradients appended to ``grads`` for the parent's
        ``_accumulate``; a child that only overrides ``backward`` accumulates its own."""
        if type(child).backward is not Module.backward:
            return child.backward(grad_output)
        d_x, own = child._gradients(grad_output)
        grads += own
        return d_x

    def _accumulate(self, grads: list[tuple[Parameter, np.ndarray]]) -> None:
        """``param.grad += d`` for every pair, after checking every ``.grad`` (validate, then apply)."""
        for param, d in grads:
            g, data = param.grad, param._data
            if type(g) is np.ndarray and g.shape == d.shape == data.shape and g.dtype == data.dtype:
                if g.flags.writeable and not overlaps_itself(g):
                    continue
            if not param._requires_grad:
                continue  # frozen: nothing is accumulated
            problem = grad_problem(param.grad, param.data, d.shape)
            if problem is not None:
                raise BackwardError(self._describe_grad_problem(param, problem))
        for param, other, what in shared_grads(param for param, _ in grads)[:1]:
            theirs = "its own .data" if other is param and what == "data" else f"{self._name(other)}.{what}"
            raise BackwardError(self._describe_grad_problem(param, f"shares memory with {theirs}"))
        for param, d in grads:
            if param.grad is None and param._requires_grad:
                param.grad = np.zeros_like(param.data)
            param.accumulate_grad(d)

    def _name(self, param: Parameter) -> str:
        return next((n for n, p in self.named_parameters() if p is param), "a parameter")

    def _describe_grad_problem(self, param: Parameter, problem: str) -> str:
        return (
            f"{type(self).__name__}.backward(): {self._name(param)}.grad {problem}; no gradient was changed "
            "(set it to None or to zeros of the parameter's shape and dtype, e.g. with zero_grad())"
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:  # module.forward(x) runs as module(x)
        super().__init_subclass__(**kwargs)
        route_forward(cls, Module.__call__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        check_specs(self)
        object.__setattr__(self, "_forward_count", self._forward_count + 1)  # which forward a loss came from
        calls, state = CALLS, self.__dict__
        if calls.depth == 0:  # an outermost call: a new forward pass
            calls.number, calls.outer = next(PASSES), type(self).__name__
        state["_repeated"] = calls.outer if state.get("_outer_call") == calls.number else ""
        state["_outer_call"] = calls.number
        calls.depth += 1
        entered = id(self) not in calls.inside
        calls.inside.add(id(self))
        try:
            result = self.forward(*args, **kwargs)
        finally:
            calls.depth -= 1
            if entered:
                calls.inside.discard(id(self))
        # what this forward used, once it succeeded (a parameter it made or replaced itself included)
        deep = self._children_parameters() if self._reads_children_parameters else ()
        state["_members"] = (tuple(self._parameters.items()), tuple(self._modules.items()), deep)
        return result

    def _saved(self) -> Any:
        """The cache of the last forward; raises BackwardError if there was none, or if this
        module ran more than once within that forward pass (the cache holds the last use only)."""
        cache = self._cache
        if cache is None or isinstance(cache, str):
            why = "called before forward()"
            if cache is not None:
                why = f"called after {cache}, which discarded the last forward"
            raise BackwardError(
                f"{type(self).__name__}.backward() {why}: run a forward pass first (forward stores what backward needs)"
            )
        self._check_members()
        if self._modules:
            check_no_later_forward(self)
        if self._repeated:
            raise BackwardError(
                f"{type(self).__name__}.backward(): this instance ran more than once in one forward of "
                f"{self._repeated}, and a module keeps the cache of its last use only (the gradients of the "
                "earlier uses would be wrong): give each use its own instance"
            )
        return cache

    def _children_parameters(self) -> tuple[tuple[str, Parameter], ...]:
        """(dotted name, Parameter) of each submodule's own parameters (one level down)."""
        return tuple((f"{c}.{n}", p) for c, child in self._modules.items() for n, p in child._parameters.items())

    def _check_members(self) -> None:
        """The parameters and submodules are the objects the last forward used: one replaced since
        (same shape or not), removed or added would take the forward's gradient in another's place.

        Raises:
            BackwardError: naming it.
        """
        if self._members is None:  # never called (its forward run directly): nothing recorded to compare
            return
        params, modules, deep = self._members
        checks: list[tuple[str, tuple[tuple[str, Any], ...], Mapping[str, Any]]] = [
            ("parameter", params, self._parameters), ("submodule", modules, self._modules)
        ]
        if deep:  # a forward that read its submodules' parameters: one of them replaced counts too
            checks.append(("parameter", deep, dict(self._children_parameters())))
        for kind, was, now in checks:
            if len(was) == len(now) and all(now.get(name) is obj for name, obj in was):
                continue
            gone = [name for name, obj in was if now.get(name) is not obj]
            name = gone[0] if gone else next(n for n in now if n not in dict(was))
            how = "added" if not gone else "removed" if name not in now else "replaced by another object"
            raise BackwardError(
                f"{type(self).__name__}.backward(): its {kind} {name!r} was {how} since the last forward, whose "
                "gradients belong to the objects it used: run forward again (no gradient was changed)"
            )

    def _record(self) -> Recorder | None:
        """The stage recorder installed by ``npattn.trace`` (None when not tracing)."""
        return self._recorder

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


_DISCARDED_BY_LOAD = "load_state_dict()"
_DISCARDED_BY_TO = "to()"
"""What ``_cache`` holds after a call that discarded the last forward (``_saved`` names it)."""

