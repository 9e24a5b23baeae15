"""The containers: PyTorch's ``nn.ModuleList`` and ``nn.Sequential``, with the backward that runs
Sequential's children in reverse.

Children are registered as ``"0"``, ``"1"``, ... (so ``state_dict`` keys read ``0.weight``,
``1.bias``, like PyTorch's). forward feeds each child's output to the next; backward hands the
gradient to the last child first and passes each child's input gradient to the one before it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, overload

import numpy as np

from npattn.errors import BackwardError, ConfigError, DTypeError
from npattn.nn.module import Module, Parameter

__all__ = ["ModuleList", "Sequential"]


def _at(modules: list[Module], index: Any, owner: str) -> Module:
    """``modules[index]`` for an integer index; an IndexError naming the index and the length (as
    PyTorch's containers raise) instead of a bare "list index out of range"."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise DTypeError(f"{owner} indices must be integers or slices, got {type(index).__name__}")
    if not -len(modules) <= index < len(modules):
        raise IndexError(f"{owner} index {int(index)} is out of range: it holds {len(modules)} modules")
    return modules[int(index)]


class ModuleList(Module):
    """Holds sub-Modules in a list, registered as ``"0"``, ``"1"``, ... (``nn.ModuleList``).
    A slice is a new ModuleList of the same modules (renumbered from ``"0"``)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for module in modules or ():
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    @overload
    def __getitem__(self, index: int) -> Module: ...
    @overload
    def __getitem__(self, index: slice) -> ModuleList: ...
    def __getitem__(self, index: int | slice) -> Module | ModuleList:
        if isinstance(index, slice):
            return ModuleList(list(self._modules.values())[index])
        return _at(list(self._modules.values()), index, type(self).__name__)

    def __setitem__(self, index: int, module: Module) -> None:
        """Put ``module`` at ``index`` under that position's name (``nn.ModuleList.__setitem__``)."""
        _at(list(self._modules.values()), index, type(self).__name__)  # the index check and its errors
        setattr(self, list(self._modules)[int(index)], module)

    def __delitem__(self, index: int | slice) -> None:
        """Remove the module(s) at ``index`` and renumber the rest from ``"0"`` (as PyTorch does, for a
        Sequential built with names too)."""
        names = list(self._modules)
        if isinstance(index, slice):
            doomed = names[index]
        else:
            _at(list(self._modules.values()), index, type(self).__name__)
            doomed = [names[int(index)]]
        for name in doomed:
            delattr(self, name)
        kept = list(self._modules.values())
        for name in list(self._modules):
            delattr(self, name)
        for module in kept:
            self.append(module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class Sequential(ModuleList):
    """``Sequential(a, b, c)`` or ``Sequential(OrderedDict(name=module, ...))``.

    forward: x -> c(b(a(x))); backward: grad_output -> a.backward(b.backward(c.backward(grad_output))).
    Indexing, ``len``, iteration and ``append`` are ``ModuleList``'s; a slice is a Sequential of
    the same modules under the same names (as in PyTorch).

    One module instance may sit only once in a Sequential's tree: a module keeps the cache of its
    last forward only, so the backward of its first use would read the second use's input and
    give wrong parameter gradients. Build a second instance for the second position.

    Raises:
        ConfigError: a child that is not an npattn Module (``Sequential(3)``); a module instance
            that would sit twice in the tree (``Sequential(l, l)``), naming both positions.
    """

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()  # an empty ModuleList; the children are added below
        first = modules[0] if len(modules) == 1 else None
        pairs = first.items() if isinstance(first, OrderedDict) else ((str(i), m) for i, m in enumerate(modules))
        for name, module in pairs:
            self.add_module(name, module)  # type: ignore[arg-type]  # add_module refuses non-Modules

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Module) and "_modules" in self.__dict__:
            children = [(n, m) for n, m in self._modules.items() if n != name] + [(name, value)]
            _refuse_repeats(children)
        super().__setattr__(name, value)

    @overload
    def __getitem__(self, index: int) -> Module: ...
    @overload
    def __getitem__(self, index: slice) -> Sequential: ...
    def __getitem__(self, index: int | slice) -> Module | Sequential:
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return _at(list(self._modules.values()), index, type(self).__name__)

    def forward(self, x: Any) -> Any:
        object.__setattr__(self, "_cache", list(self._modules.items()))  # the children this forward runs
        for module in self._modules.values():
            x = module(x)
        return x

    def _gradients(self, grad_output: Any) -> tuple[Any, list[tuple[Parameter, np.ndarray]]]:
        """The children's gradients, last child first; ``backward`` accumulates them all at once,
        after checking every ``.grad``. A child that only overrides ``backward`` accumulates its own.

        Raises:
            BackwardError: the children changed since the forward (one set, deleted or appended).
        """
        ran = self._saved()
        now = list(self._modules.items())
        if [(n, id(m)) for n, m in ran] != [(n, id(m)) for n, m in now]:
            raise BackwardError(
                f"Sequential.backward(): its children changed since its forward (it ran {[n for n, _ in ran]}, it "
                f"holds {[n for n, _ in now]}, or a module was replaced), so the gradients would not be those of "
                "the forward that ran: run the forward again"
            )
        grad: Any = grad_output
        grads: list[tuple[Parameter, np.ndarray]] = []
        for module in reversed(self._modules.values()):
            # the input gradient of this child is the output gradient of the one before
            grad = self._child_gradients(module, grad, grads)
        return grad, grads


def _refuse_repeats(children: list[tuple[str, Module]]) -> None:
    """ConfigError if one module instance sits at two places of the tree below ``children``."""
    where: dict[int, str] = {}

    def walk(module: Module, path: str) -> None:
        if id(module) in where:
            raise ConfigError(
                f"Sequential: the same {type(module).__name__} instance would sit at {where[id(module)]!r} and "
                f"{path!r}; a module keeps the cache of its last forward only, so backward would differentiate "
                "both uses with the second one's input (wrong gradients): build a second instance for the "
                "second position"
            )
        where[id(module)] = path
        for child_name, child in module._modules.items():
            walk(child, f"{path}.{child_name}")

    for name, module in children:
        walk(module, name)
