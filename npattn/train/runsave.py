"""The save target of a run that saves repeatedly: ``RunProgress`` is ``Progress`` with a
``SaveGuard``, so each save first checks that the path still holds what the run last wrote there
(or what was there when it started: nothing, or a training run's checkpoint, checked again
here), and a run stopped before its first save says so exactly."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from npattn.train import checkpoint
from npattn.train.atomic import check_outputs
from npattn.train.loop import Interrupted, Progress
from npattn.train.saveguard import SaveGuard

__all__ = ["LOOP", "RunProgress", "interrupt_before_the_first_step"]

LOOP = threading.local()
"""``LOOP.started``: this thread's run has entered its loop (``RunProgress.interrupts``)."""


@dataclass
class RunProgress(Progress):
    """``Progress`` whose ``guard`` (a ``SaveGuard`` of ``save``, taken when the run starts) is
    passed to ``checkpoint.save_run`` by the run's write, and told the step of each write."""

    guard: SaveGuard | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_outputs(self.save)  # again, just before the guard's look: nothing, or a run's checkpoint
        self.guard = None if self.save is None else SaveGuard(self.save)

    def _holds(self) -> str:
        if self.saved is None and self.seen is None and self._on_disk() is None:
            return "does not exist"
        return super()._holds()

    @contextmanager
    def interrupts(self) -> Iterator[None]:
        LOOP.started = True  # a Ctrl-C from here on is the loop's to report (train_task's set-up is over)
        with super().interrupts():
            yield

    def record_save(self, step: int, write: Callable[[], os.stat_result | None]) -> None:
        super().record_save(step, write)
        if self.guard is not None:
            self.guard.step = step

    def save_run(self, step: int, state: Mapping[str, Any], model_class: str, config: dict[str, Any]) -> None:
        """``checkpoint.save_run`` of step ``step`` to ``save`` through ``record_save``, guarded.

        Raises:
            CheckpointError: as ``checkpoint.save_run``, or ``save`` changed by someone else since
                the run's last write (or its start), left as it is.
        """
        path = self.save
        assert path is not None
        self.record_save(step, lambda: checkpoint.save_run(state, path, model_class, config, self.guard))


_P = ParamSpec("_P")
_R = TypeVar("_R")


def interrupt_before_the_first_step(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """``run`` (``train_task``, ``run_lm``), with a Ctrl-C that lands before its first step (while the
    resumed checkpoint is read, the task and model are built: outside the loop, whose interrupts say
    what the checkpoint holds) saying that no checkpoint was written (it said "interrupted" alone)."""

    @functools.wraps(run)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        outer = getattr(LOOP, "started", False)  # a run inside a run's callback: restored after
        LOOP.started = False
        try:
            return run(*args, **kwargs)
        except KeyboardInterrupt as exc:
            if str(exc) or LOOP.started:  # the loop's own message, or past the loop's start
                raise
            raise Interrupted("interrupted before the first step: no checkpoint was written") from None
        finally:
            LOOP.started = outer

    return wrapper
