"""Forward passes: every outermost Module call gets a number (``PASSES``, one counter for every
thread), and each module remembers the number of the pass its last forward ran in. Backward uses
the numbers to refuse gradients of no forward that ran: a module used twice in one pass (its cache
holds the last use only), or a submodule that ran a forward of its own after its parent's.
``kept_forward`` runs a check's forward without changing what the next backward differentiates."""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from npattn.errors import BackwardError

__all__ = ["CALLS", "PASSES", "check_no_later_forward", "kept_forward"]

PASSES = itertools.count(1)  # numbers the outermost calls of every thread: no two are equal


class _Calls(threading.local):
    """Per thread: how deep the current chain of Module calls is, and which outermost call it is."""

    depth = 0
    number = 0
    outer = ""

    def __init__(self) -> None:
        self.inside: set[int] = set()  # the ids of the modules whose __call__ runs in this thread


CALLS = _Calls()

_FORWARD_STATE = ("_cache", "_outer_call", "_repeated", "_forward_count")


def check_no_later_forward(module: Any) -> None:
    """Raise BackwardError if a submodule of ``module`` ran a forward after ``module``'s last one
    (``model.out_proj(z)`` between ``model(x)`` and ``model.backward``): the backward would mix two
    forwards, the parent's stages with the submodule's later cache."""
    own = module._outer_call
    for name, sub in module.named_modules():
        if sub is not module and sub._outer_call > own:
            raise BackwardError(
                f"{type(module).__name__}.backward(): its submodule {name} ({type(sub).__name__}) ran a forward of "
                f"its own after {type(module).__name__}'s forward, so the backward would mix two forwards: run "
                f"{type(module).__name__}'s forward again"
            )


@contextmanager
def kept_forward(module: Any) -> Iterator[None]:
    """Run forwards inside without changing what ``module.backward`` differentiates afterwards: the
    forward state of every submodule (cache, pass number, forward count) is restored on exit."""
    saved = [(sub, {key: sub.__dict__.get(key) for key in _FORWARD_STATE}) for sub in module.modules()]
    try:
        yield
    finally:
        for sub, state in saved:
            sub.__dict__.update(state)


def route_forward(cls: type, module_call: Any) -> None:
    """``module.forward(x)`` called directly runs as ``Module.__call__(module, x)`` (PyTorch gives
    both the same gradients): the call checks the parameters' shapes and dtypes and records the
    forward that a backward differentiates, which a direct call skipped (a submodule's ``.forward``
    between its parent's forward and backward changed the parent's gradients without a word; a
    model's ``.forward`` then ``.backward`` blamed a submodule). Inside a call of the module (this
    thread's ``CALLS.inside``), or when another class's forward is named (``Base.forward(m, x)``,
    ``super().forward(x)``), the forward runs as written; a forward that is no plain function
    (a staticmethod, a ufunc) is left as it is."""
    written = cls.__dict__.get("forward")
    if not inspect.isfunction(written):
        return

    @functools.wraps(written)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if id(self) in CALLS.inside or getattr(type(self), "forward", None) is not forward:
            return written(self, *args, **kwargs)
        return module_call(self, *args, **kwargs)

    cls.forward = forward  # type: ignore[attr-defined]
