"""The fit loop: the training loop every PyTorch user knows, with backward done by hand::

    for step in range(steps):
        x, target = batch(step)
        output = model(x)                       # forward
        loss = criterion(output, target)        # loss
        model.backward(criterion.backward())    # backward: fills W_query.grad, W_key.grad, ...
        optimizer.step()                        # adjust the weights
        optimizer.zero_grad()

``fit`` adds a history (the loss of every step; per parameter, how far it has moved since the
start and since the last log) and stops with ``TrainingError`` before any weight changes if the
loss or a gradient stops being finite.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn._checks import check_nonnegative_int
from npattn.errors import CheckpointError, ConfigError, NpattnError, TrainingError
from npattn.nn.losses import Loss
from npattn.nn.module import Module
from npattn.optim import Optimizer
from npattn.train.atomic import sigint_held

__all__ = [
    "History",
    "Interrupted",
    "Progress",
    "check_callback",
    "check_criterion",
    "check_finite",
    "check_history",
    "check_history_of",
    "check_optimizer_settings",
    "check_optimizer_steps",
    "fit",
    "history_weights_problem",
    "progress_header",
    "progress_line",
]

Batches = Callable[[int], tuple[np.ndarray, Any]]


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

    def state_dict(self) -> dict[str, Any]:
        """Plain arrays and lists (for checkpoints)."""
        return {
            "loss": np.array(self.loss, dtype=np.float64),
            "log_steps": np.array(self.log_steps, dtype=np.int64),
            "moved_from_start": {k: np.array(v) for k, v in self.moved_from_start.items()},
            "moved_since_log": {k: np.array(v) for k, v in self.moved_since_log.items()},
            "start": dict(self.start),
            "last_log": dict(self.last_log),
        }

    @classmethod
    def from_state_dict(cls, state: Any) -> History:
        """The history ``state_dict`` gave, every entry checked: finite losses, whole increasing step
        counts >= 1, finite distances >= 0 and real-number arrays keyed by parameter name.

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
        return cls(
            loss=_numbers(state["loss"], "loss", float, -math.inf),
            log_steps=log_steps,
            moved_from_start=_by_parameter(state, "moved_from_start", lambda v, at: _numbers(v, at, float, 0)),
            moved_since_log=_by_parameter(state, "moved_since_log", lambda v, at: _numbers(v, at, float, 0)),
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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped training; the message says the step the run reached and what its
    last checkpoint holds (a checkpoint is written atomically: an interrupted write leaves the old file)."""


@dataclass
class Progress:
    """How far a run got: ``step`` updates done, ``saved`` the step of the last checkpoint it wrote
    to ``save`` (None: none yet). ``interrupts()`` turns Ctrl-C into ``Interrupted`` saying so."""

    step: int
    save: str | None
    saved: int | None = None

    def checkpoint(self) -> str:
        """What the save target holds now, as a sentence."""
        if self.save is None:
            return "no checkpoint was written (no save path)"
        if self.saved is None:
            return f"no checkpoint was written: {self.save!r} is as it was before the run"
        return f"the last checkpoint {self.save!r} holds step {self.saved}"

    def record_save(self, step: int, write: Callable[[], None]) -> None:
        """``write()`` (the atomic save of step ``step``), then ``saved = step``, with Ctrl-C held
        back until both are done: an interrupt is never reported against a file it did not see."""
        with sigint_held():
            write()
            self.saved = step

    @contextmanager
    def interrupts(self) -> Iterator[None]:
        try:
            yield
        except KeyboardInterrupt as exc:
            if isinstance(exc, Interrupted):
                raise
            raise Interrupted(f"interrupted at step {self.step}; {self.checkpoint()}") from None


def check_callback(value: Any, name: str, arguments: str) -> None:
    """A callback argument (``on_log``, ``on_step``, ...): None or a function of ``arguments``.

    Raises:
        ConfigError: naming the argument, what it is called with and what it got.
    """
    if value is not None and not callable(value):
        raise ConfigError(f"{name} must be a function {name}({arguments}) or None, got {type(value).__name__}")


def check_criterion(criterion: Any, owner: str) -> None:
    """A loss module: callable, with the ``backward`` the loop calls after it.

    Raises:
        ConfigError: naming ``owner`` and what it got.
    """
    if not callable(criterion) or not callable(getattr(criterion, "backward", None)):
        raise ConfigError(
            f"{owner}: criterion must be a loss with forward and backward (such as npattn.MSELoss()), "
            f"got {type(criterion).__name__}"
        )


def check_optimizer_of(model: Module, optimizer: Optimizer, owner: str) -> None:
    """Every parameter ``optimizer`` updates is one of ``model``'s (the same object): an optimizer
    built on another model's parameters would step arrays the training never changes.

    Raises:
        ConfigError: naming ``owner`` and how many of the optimizer's parameters are not the model's.
    """
    if not isinstance(optimizer, Optimizer):
        raise ConfigError(
            f"{owner}: optimizer must be an npattn Optimizer (such as SGD), got {type(optimizer).__name__}"
        )
    own = {id(p) for p in model.parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    foreign = sum(id(p) not in own for p in params)
    if foreign:
        raise ConfigError(
            f"{owner}: {foreign} of the optimizer's {len(params)} parameters are not parameters of the model "
            f"({len(own)} parameters); build the optimizer from model.parameters()"
        )


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
            raise error(f"{where}: history.{entry} must hold every parameter with its shape {shapes}, got {got}")
    logs = len(logged)
    for entry in ("moved_from_start", "moved_since_log"):
        lengths = {key: len(v) for key, v in getattr(history, entry).items()}
        if lengths != ({key: logs for key in shapes} if logs else {}):
            raise error(
                f"{where}: history.{entry} must hold {logs} distances per parameter (one per log), got {lengths}"
            )


def history_weights_problem(history: History, key: str, weights: np.ndarray, step: int) -> str | None:
    """What makes ``history``'s weights of parameter ``key`` impossible after ``step`` updates that
    left it at ``weights``, else None: before the first log ``last_log`` is ``start`` (and at step 0
    both are the weights); a log at ``step`` recorded the weights as they are."""
    start, last, logs = history.start[key], history.last_log[key], history.log_steps
    if not logs and not np.array_equal(last, start):
        return f"history.last_log[{key!r}] differs from history.start before the first log"
    if step == 0 and not np.array_equal(start, weights):
        return f"history.start[{key!r}] differs from the model's weights at step 0 (the run's start)"
    if logs and logs[-1] == step and not np.array_equal(last, weights):
        return f"history.last_log[{key!r}] differs from the model's weights, logged at step {step}"
    return None


def check_optimizer_settings(optimizer: Optimizer, name: str) -> None:
    """A resumed optimizer's settings (every one in every group: lr, betas, eps, weight_decay,
    amsgrad, maximize, momentum, ...) equal ``optimizer.defaults``, the settings the run's options
    give the optimizer it builds; an edited checkpoint would otherwise train differently.

    Raises:
        CheckpointError: naming the checkpoint ``name``, the setting, its value and the run's value.
    """
    for group in optimizer.param_groups:
        for key, want in optimizer.defaults.items():
            if group[key] != want:
                raise CheckpointError(
                    f"{name!r}: its optimizer's {key} {group[key]} differs from the run's {key} {want} (the "
                    "settings the run's options give); the optimizer's settings cannot change on resume"
                )


def check_optimizer_steps(optimizer: Optimizer, steps: int, name: str) -> None:
    """A resumed optimizer's state agrees with the ``steps`` updates the run's history counts.

    Every parameter of a training run receives a gradient at every step, so after ``steps`` updates
    Adam's and AdamW's state holds ``step == steps`` for every parameter (and no state before the
    first), and SGD with momentum holds a momentum buffer for every parameter exactly when
    ``steps > 0``. Anything else (an emptied state: moments silently restarting from zero; one
    parameter at another step) is refused before training.

    Raises:
        CheckpointError: naming the checkpoint ``name``, the parameter, the expected and the actual value.
    """
    for i, (group, p) in enumerate((g, p) for g in optimizer.param_groups for p in g["params"]):
        state = optimizer.state.get(p, {})
        where = f"{name!r}: optimizer state of parameter {i}"
        if "step" in optimizer.buffers:
            got = state.get("step", 0)
            if got != steps:
                shown = "missing (no state: the moments would restart from zero)" if not state else repr(got)
                raise CheckpointError(f"{where}: 'step' is {shown}; expected {steps}, the history's step count")
        elif group.get("momentum", 0) != 0 and ("momentum_buffer" in state) != (steps > 0):
            has = "has" if state else "has no"
            raise CheckpointError(
                f"{where} {has} a 'momentum_buffer' after {steps} steps (expected {'one' if steps else 'none'})"
            )


def check_finite(model: Module, loss: float, step: int) -> None:
    """Raise TrainingError (naming the step and the culprit) if the loss or a gradient is not finite."""
    problem = None
    if not np.isfinite(loss):
        problem = f"the loss is {loss}"
    else:
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            bad = p.grad.size - int(np.count_nonzero(np.isfinite(p.grad)))
            if bad:
                problem = f"the gradient of {name} has {bad} non-finite entries (loss {loss:.6g})"
                break
    if problem:
        raise TrainingError(
            f"training stopped at step {step}: {problem}. The weights were not updated (they hold the values "
            "after the previous step); try a smaller learning rate."
        )


def fit(
    model: Module,
    optimizer: Optimizer,
    criterion: Loss,
    batches: Batches,
    steps: int,
    *,
    start_step: int = 0,
    history: History | None = None,
    log_every: int = 0,
    on_log: Callable[[int, float, History], None] | None = None,
    on_step: Callable[[int, History], None] | None = None,
) -> History:
    """Train for steps ``start_step .. steps - 1``: forward, loss, backward, step, zero_grad.

    ``batches(step) -> (x, target)``. Every ``log_every`` updates (and after the last) the history
    logs how far each parameter moved and ``on_log(step, loss, history)`` is called;
    ``on_step(step, history)`` runs after every update (``train_task`` saves checkpoints there).

    Raises:
        ConfigError: a negative or non-integer count, ``start_step`` above ``steps``, a callback or
            ``batches`` that is not a function, a ``criterion`` without ``backward`` or with
            ``reduction="none"``, an optimizer with a parameter that is not the model's, a
            ``history`` that is not this model's record of ``start_step`` steps (its loss count,
            log steps, parameter shapes, or its last logged weights differ).
        TrainingError: the loss or a gradient became NaN or inf (the weights keep their last
            finite values; nothing after the failing step runs).
    """
    steps = check_nonnegative_int(steps, "steps")
    start_step = check_nonnegative_int(start_step, "start_step")
    check_nonnegative_int(log_every, "log_every")
    if not callable(batches):
        raise ConfigError(f"fit: batches must be a function step -> (x, target), got {type(batches).__name__}")
    check_criterion(criterion, "fit")
    check_optimizer_of(model, optimizer, "fit")
    check_callback(on_log, "on_log", "step, loss, history")
    check_callback(on_step, "on_step", "step, history")
    if start_step > steps:
        raise ConfigError(
            f"fit: start_step={start_step} is past steps={steps} (the total step count, not the steps left); "
            "a run resumed at its last step passes start_step == steps and trains nothing"
        )
    if getattr(criterion, "reduction", None) == "none":  # a loss of one's own may have no reduction
        raise ConfigError(
            "fit: the criterion must give a scalar loss (reduction 'mean' or 'sum'), got reduction='none' "
            "(a loss per element has no single step loss to record)"
        )
    if history is None:
        history = History.begin(model)
    else:
        _check_given_history(history, model, start_step)
    optimizer.zero_grad()
    for step in range(start_step, steps):
        x, target = batches(step)
        output = model(x)
        loss = criterion(output, target)
        model.backward(criterion.backward())
        check_finite(model, loss, step)
        optimizer.step()
        optimizer.zero_grad()
        history.loss.append(float(loss))
        done = step + 1
        if (log_every and done % log_every == 0) or done == steps:
            history.log(model, done)
            if on_log:
                on_log(done, float(loss), history)
        if on_step:
            on_step(done, history)
    return history


def _check_given_history(history: History, model: Module, start_step: int) -> None:
    """The history ``fit`` continues is this model's record of ``start_step`` steps."""
    where = f"fit (start_step={start_step})"
    check_history_of(history, model, start_step, ConfigError, where)
    for key, p in model.named_parameters():
        wrong = history_weights_problem(history, key, p.data, start_step)
        if wrong:
            raise ConfigError(
                f"{where}: {wrong}; pass the history of this model's run up to start_step, or none"
            )


def progress_header(names: tuple[str, ...] = ("W_query", "W_key", "W_value")) -> str:
    """The column titles above ``progress_line``."""
    return " step       loss   moved from start:" + "".join(f"{name:>9}" for name in names)


def progress_line(step: int, loss: float, history: History) -> str:
    """``step, loss, ||W - W_start||`` for every parameter, as the last log recorded them."""
    moved = "".join(f" {_moved(history.moved_from_start.get(name, [0.0])[-1]):>8}" for name in history.start)
    return f"{step:>5}  {loss:9.4g}  {'':>17}{moved}"


def _moved(distance: float) -> str:
    """A distance in at most 8 characters, so the columns never run together."""
    text = f"{distance:.3f}"
    return text if len(text) <= 8 else f"{distance:.2e}"
