"""Sequential: PyTorch's ``nn.Sequential``, with the backward that runs its children in reverse.

Children are registered as ``"0"``, ``"1"``, ... (so ``state_dict`` keys read ``0.weight``,
``1.bias``, like PyTorch's). forward feeds each child's output to the next; backward hands the
gradient to the last child first and passes each child's input gradient to the one before it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from npattn.nn.module import Module, ModuleList, Parameter

__all__ = ["Sequential"]


class Sequential(ModuleList):
    """``Sequential(a, b, c)`` or ``Sequential(OrderedDict(name=module, ...))``.

    forward: x -> c(b(a(x))); backward: grad_output -> a.backward(b.backward(c.backward(grad_output))).
    Indexing, ``len``, iteration and ``append`` are ``ModuleList``'s.

    Raises:
        ConfigError: a child that is not an npattn Module (``Sequential(3)``).
    """

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()  # an empty ModuleList; the children are added below
        first = modules[0] if len(modules) == 1 else None
        pairs = first.items() if isinstance(first, OrderedDict) else ((str(i), m) for i, m in enumerate(modules))
        for name, module in pairs:
            self.add_module(name, module)  # type: ignore[arg-type]  # add_module refuses non-Modules

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x

    def _gradients(self, grad_output: Any) -> tuple[Any, list[tuple[Parameter, np.ndarray]]]:
        """The children's gradients, last child first; ``backward`` accumulates them all at once,
        after checking every ``.grad``. A child that only overrides ``backward`` accumulates its own."""
        grad: Any = grad_output
        grads: list[tuple[Parameter, np.ndarray]] = []
        for module in reversed(self._modules.values()):
            # the input gradient of this child is the output gradient of the one before
            grad = self._child_gradients(module, grad, grads)
        return grad, grads
