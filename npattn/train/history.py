"""A training run's record: ``History`` (the loss of every step and, per parameter, how far it has
moved since the start and since the last log), reading it back from a checkpoint with every entry
checked, and the checks that a history is a given model's record of a given number of steps
(``fit(start_step=, history=)`` and a resumed ``npattn train`` share them).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn.errors import CheckpointError, NpattnError
from npattn.nn.module import Module

__all__ = ["History", "check_history", "check_history_of", "history_weights_problem"]


@dataclass
class History:
    """What training did. ``loss[t]`` is the loss of step t (before its update); at each logged
    step (after ``log_steps[i]`` updates), ``moved_from_start[name][i]`` is ||W - W_start|| and
    ``moved_since_log[name][i]`` is ||W - W_at_previous_log|| (Frobenius norms)."""

    loss: list[float] = field(default_factory=list)
    log_steps: list[int] = field(default_factory=list)
    moved_from_start: dict[str, list[float]] = field(default_factory=dict)
    moved_since_log: dict[str, list[float]] = field(default_factory=dict)
    start: dict[str, np.ndarray] = field(default_factory=dict)
    last_log: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def begin(cls, model: Module) -> History:
        """An empty history that remembers the model's starting parameters."""
        start = {name: p.data.copy() for name, p in model.named_parameters()}
        return cls(start=start, last_log={k: v.copy() for k, v in start.items()})

    def log(self, model: Module, step: int) -> None:
        """Record how far every parameter has moved, after ``step`` updates."""
        self.log_steps.append(step)
        for name, p in model.named_parameters():
            self.moved_from_start.setdefault(name, []).append(float(np.linalg.norm(p.data - self.start[name])))
            self.moved_since_log.setdefault(name, []).append(float(np.linalg.norm(p.data - self.last_log[name])))
            self.last_log[name] = p.data.copy()

    def logged_other_weights(self, model: Module) -> bool:
        """Whether some parameter of ``model`` differs from what the last log recorded."""
        return any(not np.array_equal(p.data, self.last_log[name]) for name, p in model.named_parameters())

    def unlog(self, last_log: dict[str, np.ndarray]) -> None:
        """Undo the last ``log``, given the ``last_log`` it replaced."""
        self.log_steps.pop()
        for name in last_log:
            self.moved_from_start[name].pop()
            self.moved_since_log[name].pop()
        self.last_log = dict(last_log)

    def copy(self) -> History:
        """A copy sharing nothing a caller could change in place (new lists of the same floats, new
        arrays): what ``train_task`` hands a callback, in time linear in the lists' lengths."""
        return History(
            loss=list(self.loss),
            log_steps=list(self.log_steps),
            moved_from_start={k: list(v) for k, v in self.moved_from_start.items()},
            moved_since_log={k: list(v) for k, v in self.moved_since_log.items()},
            start={k: v.copy() for k, v in self.start.items()},
            last_log={k: v.copy() for k, v in self.last_log.items()},
        )

    def state_dict(self) -> dict[str, Any]:
        """Plain arrays and lists (for checkpoints), sharing no memory with the history."""
        return {
            "loss": np.array(self.loss, dtype=np.float64),
            "log_steps": np.array(self.log_steps, dtype=np.int64),
            "moved_from_start": {k: np.array(v) for k, v in self.moved_from_start.items()},
            "moved_since_log": {k: np.array(v) for k, v in self.moved_since_log.items()},
            "start": {k: v.copy() for k, v in self.start.items()},
            "last_log": {k: v.copy() for k, v in self.last_log.items()},
        }

    @classmethod
    def from_state_dict(cls, state: Any) -> History:
        """The history ``state_dict`` gave, every entry checked: finite losses, whole increasing step
        counts in [1, number of losses], finite distances >= 0 (one per log step) and real-number arrays
        keyed by parameter name.

        Raises:
            CheckpointError: a missing or extra entry, or one of the wrong type or out of range
                (the message names it).
        """
        if not isinstance(state, dict) or set(state) != set(HISTORY_KEYS):
            got = sorted(str(k) for k in state) if isinstance(state, dict) else type(state).__name__
            raise CheckpointError(f"the history must be a dict of the entries {list(HISTORY_KEYS)}, got {got}")
        log_steps = _numbers(state["log_steps"], "log_steps", int, 1)
        if any(a >= b for a, b in itertools.pairwise(log_steps)):
            raise CheckpointError(f"history.log_steps must be increasing step counts, got {log_steps[:8]}")
        loss = _numbers(state["loss"], "loss", float, -math.inf)
        if log_steps and log_steps[-1] > len(loss):
            raise CheckpointError(
                f"history.log_steps holds step {log_steps[-1]}, past the {len(loss)} losses recorded "
                f"(one per step): log steps must lie in [1, {len(loss)}]"
            )
        moved = {}
        for entry in ("moved_from_start", "moved_since_log"):  # one distance per log step
            moved[entry] = _by_parameter(state, entry, lambda v, at: _numbers(v, at, float, 0))
            for key, values in moved[entry].items():
                if len(values) != len(log_steps):
                    raise CheckpointError(
                        f"history.{entry}[{key!r}] holds {len(values)} distances for the {len(log_steps)} log "
                        f"steps in history.log_steps (one per log step)"
                    )
        return cls(
            loss=loss,
            log_steps=log_steps,
            moved_from_start=moved["moved_from_start"],
            moved_since_log=moved["moved_since_log"],
            start=_by_parameter(state, "start", _weights),
            last_log=_by_parameter(state, "last_log", _weights),
        )


HISTORY_KEYS = ("loss", "log_steps", "moved_from_start", "moved_since_log", "start", "last_log")


def _numbers(values: Any, key: str, kind: type, low: float) -> list[Any]:
    """A history entry read back from a file: a list (or 1-D array) of finite real numbers >= ``low``;
    ``kind`` int: whole numbers, never truncated (2.5 is refused)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        values = values.tolist()
    if not isinstance(values, list):
        raise CheckpointError(f"history.{key} must be a list of numbers, got {type(values).__name__}")
    noun = "a whole step count" if kind is int else "a number"
    for i, v in enumerate(values):
        ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        if not ok or (kind is int and not float(v).is_integer() and math.isfinite(v)):
            raise CheckpointError(f"history.{key}[{i}] must be {noun}, got {v!r}")
        if not math.isfinite(v):
            raise CheckpointError(f"history.{key}[{i}] is {v}; a run records finite values only")
        if v < low:
            raise CheckpointError(f"history.{key}[{i}] must be {noun} >= {low:g}, got {v!r}")
    return [kind(v) for v in values]


def _weights(value: Any, key: str) -> np.ndarray:
    """A parameter's weights read back from a file: an array of real numbers."""
    try:
        array = np.asarray(value) if isinstance(value, (np.ndarray, list)) else None
    except ValueError:  # ragged nested lists
        array = None
    if array is None or array.dtype.kind not in "fiu":
        raise CheckpointError(f"history.{key} must be an array of real numbers, got {type(value).__name__}")
    return array.copy()


def _by_parameter(state: dict[str, Any], entry: str, read: Callable[[Any, str], Any]) -> dict[str, Any]:
    """``state[entry]``: a dict from parameter names to values ``read`` checks."""
    values = state[entry]
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise CheckpointError(f"history.{entry} must be a dict keyed by parameter name, got {type(values).__name__}")
    return {k: read(v, f"{entry}[{k!r}]") for k, v in values.items()}


def check_history(history: History, name: str) -> None:
    """A restored history's recorded numbers are finite: a NaN or inf loss or distance is never a
    record a run makes (``fit`` stops before recording one); and its losses, those of npattn's
    losses (MSELoss, CrossEntropyLoss: the tasks' criteria), are >= 0.

    Raises:
        CheckpointError: naming the checkpoint ``name``, the entry and the position.
    """
    negative = [i for i, v in enumerate(history.loss) if v < 0]
    if negative:
        raise CheckpointError(
            f"{name!r}: history.loss[{negative[0]}] is {history.loss[negative[0]]}; a run's losses are >= 0 "
            "(npattn's MSELoss and CrossEntropyLoss never go below 0)"
        )
    entries = {"loss": history.loss}
    for entry in ("moved_from_start", "moved_since_log"):
        entries.update({f"{entry}[{key!r}]": values for key, values in getattr(history, entry).items()})
    for entry, values in entries.items():
        bad = [i for i, v in enumerate(values) if not np.isfinite(v)]
        if bad:
            raise CheckpointError(
                f"{name!r}: history.{entry}[{bad[0]}] is {values[bad[0]]}; a run records finite values only"
            )


def check_history_of(history: History, model: Module, step: int, error: type[NpattnError], where: str) -> None:
    """``history`` can be the record of ``step`` updates of ``model``: one loss per step, log steps
    increasing in [1, step], ``start`` and ``last_log`` holding every parameter with its shape in
    real numbers, each ``moved_*`` list one distance per log. ``fit`` (given a history) and
    ``train_task``'s resume share this.

    Raises:
        error: ``where``, then the entry that does not fit (expected and actual).
    """
    if not isinstance(history, History):
        raise error(f"{where}: history must be an npattn History (fit's result), got {type(history).__name__}")
    if len(history.loss) != step:
        raise error(f"{where}: its history has {len(history.loss)} losses for {step} steps (one loss per step)")
    logged = history.log_steps
    if any(not 1 <= s <= step for s in logged) or any(a >= b for a, b in itertools.pairwise(logged)):
        raise error(f"{where}: history.log_steps must be increasing step counts in [1, {step}], got {logged[:8]}")
    shapes = {key: p.shape for key, p in model.named_parameters()}
    for entry in ("start", "last_log"):
        arrays = getattr(history, entry)
        got = {key: np.shape(a) for key, a in arrays.items()}
        if got != shapes or any(np.asarray(a).dtype.kind not in "fiu" for a in arrays.values()):
            missing, extra = sorted(set(shapes) - set(got)), sorted(set(got) - set(shapes))
            named = "".join(f"; {what} {keys}" for what, keys in (("missing", missing), ("extra", extra)) if keys)
            raise error(f"{where}: history.{entry} must hold every parameter with its shape {shapes}, got {got}{named}")
    logs = len(logged)
    for entry in ("moved_from_start", "moved_since_log"):
        lengths = {key: len(v) for key, v in getattr(history, entry).items()}
        if lengths != ({key: logs for key in shapes} if logs else {}):
            missing, extra = sorted(set(shapes) - set(lengths)) if logs else [], sorted(set(lengths) - set(shapes))
            named = "".join(f"; {what} {keys}" for what, keys in (("missing", missing), ("extra", extra)) if keys)
            raise error(
                f"{where}: history.{entry} must hold {logs} distances per parameter (one per log), got {lengths}{named}"
            )


def history_weights_problem(history: History, key: str, weights: np.ndarray, step: int) -> str | None:
    """What makes ``history``'s weights of parameter ``key`` impossible after ``step`` updates that
    left it at ``weights``, else None: before the first log ``last_log`` is ``start`` (and at step 0
    both are the weights); a log at ``step`` recorded the weights as they are; ``moved_from_start``
    ends in ||last_log - start|| and the first ``moved_since_log`` equals the first
    ``moved_from_start`` (both measure from the start; the run computed them the same way)."""
    start, last, logs = history.start[key], history.last_log[key], history.log_steps
    if not logs and not np.array_equal(last, start):
        return f"history.last_log[{key!r}] differs from history.start before the first log"
    if step == 0 and not np.array_equal(start, weights):
        return f"history.start[{key!r}] differs from the model's weights at step 0 (the run's start)"
    if logs and logs[-1] == step and not np.array_equal(last, weights):
        return f"history.last_log[{key!r}] differs from the model's weights, logged at step {step}"
    if not logs:
        return None
    moved_start, moved_log = history.moved_from_start[key], history.moved_since_log[key]
    if moved_start[-1] != float(np.linalg.norm(last - start)):
        return (
            f"history.moved_from_start[{key!r}][-1] is {moved_start[-1]}, but ||last_log - start|| is "
            f"{float(np.linalg.norm(last - start))}"
        )
    if moved_log[0] != moved_start[0]:
        return (
            f"history.moved_since_log[{key!r}][0] is {moved_log[0]}, but the first log measures from the start: "
            f"history.moved_from_start[{key!r}][0] is {moved_start[0]}"
        )
    return None
