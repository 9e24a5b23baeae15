"""Forward passes: every outermost Module call gets a number (``PASSES``, one counter for every
thread), and each module remembers the number of the pass its last forward ran in. Backward uses
the numbers to refuse gradients of no forward that ran: a module used twice in one pass (its cache
holds the last use only), or a submodule that ran a forward of its own after its parent's.
``kept_forward`` runs a check's forward without changing what the next backward differentiates."""

from __future__ import annotations

import functools
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


def route_forward(cls: type) -> None:
    """``module.forward(x)`` called directly runs as ``module(x)`` (PyTorch gives both the same
    gradients): ``Module.__call__`` checks the parameters' shapes and dtypes and records the forward
    that a backward differentiates, which a direct call skipped (a submodule's ``.forward`` between
    its parent's forward and backward changed the parent's gradients without a word; a model's
    ``.forward`` then ``.backward`` blamed a submodule). Inside ``__call__`` the forward runs as
    written (``_in_call``); ``_routing`` keeps a ``__call__`` of a subclass's own, which does not
    come back through ``Module.__call__``, from looping."""
    if "forward" not in cls.__dict__:
        return
    written = cls.__dict__["forward"]

    @functools.wraps(written)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = self.__dict__
        if state.get("_in_call") or state.get("_routing"):
            return written(self, *args, **kwargs)
        state["_routing"] = True
        try:
            return self(*args, **kwargs)
        finally:
            state["_routing"] = False

    cls.forward = forward  # type: ignore[attr-defined]
