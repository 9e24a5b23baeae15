"""Sequential: PyTorch's ``nn.Sequential``, with the backward that runs its children in reverse.

Children are registered as ``"0"``, ``"1"``, ... (so ``state_dict`` keys read ``0.weight``,
``1.bias``, like PyTorch's). forward feeds each child's output to the next; backward hands the
gradient to the last child first and passes each child's input gradient to the one before it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from npattn.nn.module import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """``Sequential(a, b, c)`` or ``Sequential(OrderedDict(name=module, ...))``.

    forward: x -> c(b(a(x))); backward: grad_output -> a.backward(b.backward(c.backward(grad_output))).

    Raises:
        TypeError: a child that is not an npattn Module (as PyTorch raises).
    """

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()
        first = modules[0] if len(modules) == 1 else None
        pairs = first.items() if isinstance(first, OrderedDict) else ((str(i), m) for i, m in enumerate(modules))
        for name, module in pairs:
            self.add_module(name, module)  # type: ignore[arg-type]  # add_module refuses non-Modules

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x

    def backward(self, grad_output: Any) -> Any:
        grad = grad_output
        for module in reversed(self._modules.values()):
            grad = module.backward(grad)  # the input gradient of this child is the output gradient of the one before
        return grad

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())
