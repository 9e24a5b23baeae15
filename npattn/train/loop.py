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

import inspect
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn._checks import check_nonnegative_int
from npattn._interrupts import raise_if_pressed
from npattn.errors import CheckpointError, ConfigError, DTypeError, ShapeError, TrainingError
from npattn.nn.losses import CrossEntropyLoss, Loss, MSELoss
from npattn.nn.module import Module
from npattn.optim import Optimizer
from npattn.train.atomic import sigint_held
from npattn.train.history import History, check_history, check_history_of, history_weights_problem

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


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """A file's kind, device, inode, size and mtime: the size and time tell apart a new file that
    reuses a freed inode."""
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped training; the message says the step the run reached and what its
    last checkpoint holds (a checkpoint is written atomically: an interrupted write leaves the old file)."""


@dataclass
class Progress:
    """How far a run got: ``step`` updates done, ``saved`` the step of the last checkpoint it wrote
    to ``save`` (None: none yet). ``interrupts()`` turns Ctrl-C into ``Interrupted`` saying so.
    What is said of the save target is checked against the file system: ``seen`` is what ``save``
    named at the start or after the last save (kind, device, inode, size, mtime), so a file removed
    or replaced since (by a directory, another file, a link to /dev/null) is reported as such."""

    step: int
    save: str | None
    saved: int | None = None
    seen: tuple[int, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.seen = self._on_disk()

    def _on_disk(self) -> tuple[int, ...] | None:
        """What ``save`` names now (symlinks followed), or None if nothing."""
        try:
            return _identity(os.stat(self.save))  # type: ignore[arg-type]
        except (OSError, TypeError, ValueError):
            return None

    def _holds(self) -> str:
        """What ``save`` holds now, the end of a sentence naming it."""
        now = self._on_disk()
        changed = now != self.seen
        if self.saved is None:
            return "changed during the run, but not by it" if changed else "is as it was before the run"
        if changed and now is None:
            return f"was written at step {self.saved} but is no longer there (removed since)"
        if changed:  # a touch changes its time only: it may still hold the step, but this run cannot tell
            return (
                f"was written at step {self.saved} and has been changed since by someone else (its size, time or "
                "file replaced), so it may no longer hold that step"
            )
        return f"holds step {self.saved}"

    def checkpoint(self) -> str:
        """What the save target holds now, as a sentence."""
        if self.save is None:
            return "no checkpoint was written (no save path)"
        if self.saved is None:
            return f"no checkpoint was written: {self.save!r} {self._holds()}"
        return f"the last checkpoint {self.save!r} {self._holds()}"

    def after(self, exc: BaseException) -> str:
        """``exc``'s message as a sentence, then ``outcome()``: what stops a run, then what it left."""
        text = str(exc).rstrip()
        return f"{text}{'' if text.endswith('.') else '.'} {self.outcome()}"

    def outcome(self) -> str:
        """What the run's checkpoints left in ``save``, a sentence ending a message that stops a run."""
        if self.saved is None:
            return f"This run wrote no checkpoint: {self.save!r} {self._holds()}."
        return f"The last checkpoint of this run, {self.save!r}, {self._holds()}."

    def record_save(self, step: int, write: Callable[[], os.stat_result | None]) -> None:
        """``write()`` (the atomic save of step ``step``, returning the stat of the file it wrote, as
        ``checkpoint.save_run`` does), then ``saved = step`` and ``seen``, with Ctrl-C held back until
        all are done: an interrupt is never reported against a file it did not see, and a file
        replaced right after the write is never taken for the one written (a ``write`` that returns
        None: what the path shows just after it)."""
        with sigint_held():
            written = write()
            self.saved = step
            self.seen = self._on_disk() if written is None else _identity(written)

    @contextmanager
    def interrupts(self) -> Iterator[None]:
        try:
            yield
        except KeyboardInterrupt as exc:
            if isinstance(exc, Interrupted):
                raise
            raise Interrupted(f"interrupted at step {self.step}; {self.checkpoint()}") from None


def check_callback(value: Any, name: str, arguments: str) -> None:
    """A callback argument (``on_log``, ``on_step``, ...): None or a function that accepts the
    positional ``arguments`` it is called with (checked on its signature before the first step; a
    builtin without one passes).

    Raises:
        ConfigError: naming the argument, what it is called with and what it got.
    """
    if value is None:
        return
    if not callable(value):
        raise ConfigError(f"{name} must be a function {name}({arguments}) or None, got {type(value).__name__}")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin or extension function without a signature
        return
    count = len([a for a in arguments.split(",") if a.strip()])
    try:
        signature.bind(*range(count))
    except TypeError as exc:
        what = f"{count} positional argument{'s' if count != 1 else ''}" if count else "no arguments"
        function = f"{getattr(value, '__name__', type(value).__name__)}{signature}"
        raise ConfigError(
            f"{name} is called as {name}({arguments}) ({what}), but {function} does not accept that: {exc}"
        ) from None


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
    optimizer.check_param_groups(owner)  # each group's 'params' a list of Parameters, as step reads them
    own = {id(p) for p in model.parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    foreign = sum(id(p) not in own for p in params)
    if foreign:
        raise ConfigError(
            f"{owner}: {foreign} of the optimizer's {len(params)} parameters are not parameters of the model "
            f"({len(own)} parameters); build the optimizer from model.parameters()"
        )


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


def check_finite(model: Module, loss: float, step: int, hint: str = "try a smaller learning rate") -> None:
    """Raise TrainingError (naming the step and the culprit, then ``hint``) if the loss or a gradient
    is not finite."""
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
        found = _non_finite_weights(model)  # every update is checked: such weights came from outside the steps
        if found:
            name, entries, _ = found
            raise TrainingError(
                f"training stopped at step {step}: {problem}, because {entries} of {name} were already NaN or "
                "inf before this step's forward: set after the previous update (which left them finite), by a "
                "callback such as on_step or another edit of the weights; nothing of this step was applied."
            )
        raise TrainingError(
            f"training stopped at step {step}: {problem}. The weights were not updated (they hold the values "
            f"after the previous step); {hint}."
        )


def _hint(x: Any, target: Any) -> str:
    """What to try after a non-finite loss: the batch, when it holds NaN or inf, else the step size."""
    for name, arr in (("x", x), ("target", target)):
        values = np.asarray(arr) if isinstance(arr, (np.ndarray, list, tuple)) else None
        if values is not None and values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            return f"the batch's {name} holds NaN or inf: clean or mask the data"
    return "try a smaller learning rate"


def _non_finite_weights(model: Module) -> tuple[str, str, int] | None:
    """The first parameter holding NaN or inf: (name, "1 entry" or "n entries", its size), else None."""
    for name, p in model.named_parameters():
        bad = p.data.size - int(np.count_nonzero(np.isfinite(p.data)))
        if bad:
            return name, "1 entry" if bad == 1 else f"{bad} entries", p.data.size
    return None


def check_updated(model: Module, step: int) -> None:
    """Raise TrainingError if the update of ``step`` (from finite gradients) made a weight
    non-finite: an optimizer setting did it (Adam's eps=0 divides 0 by 0 where a gradient is 0)."""
    found = _non_finite_weights(model)
    if found:
        name, entries, _ = found
        half = any(p.data.dtype == np.float16 for p in model.parameters())
        cause = (
            "float16 holds no more than 65504, and Adam's eps of 1e-8 and small squared gradients round to 0 in "
            "it (a moment divided by 0 is inf): train float32 parameters (with Adam, or give a larger eps such as "
            "1e-4; with another optimizer, a smaller lr)"
            if half
            else "an optimizer setting such as Adam's eps=0 divides 0 by 0 where a gradient is 0"
        )
        raise TrainingError(
            f"training stopped at step {step}: its update made {entries} of {name} non-finite, from finite "
            f"gradients ({cause}); the weights hold those values now, and no checkpoint of them is written."
        )


def check_weights_finite(model: Module, where: str) -> None:
    """Refuse a model whose weights hold NaN or inf before the first step (training on them would
    move every weight, then blame the update). Raises ConfigError naming the parameter and the count."""
    found = _non_finite_weights(model)
    if found:
        name, entries, size = found
        raise ConfigError(
            f"{where}: {entries} of {name} (of {size}) are NaN or inf before the first step; nothing "
            "was trained: load or initialize finite weights"
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
    ``on_step(step, history)`` runs after every update, after ``on_log`` (``train_task`` saves
    checkpoints there); weights it changes (clipping, a max-norm) are the ones the step's log records
    once it returns (``on_log``, and a snapshot of the history ``on_step`` takes itself after
    changing them, hold the log before the change: save after the change in the next ``on_step``).

    Raises:
        ConfigError: a negative or non-integer count, ``start_step`` above ``steps``, a callback or
            ``batches`` that is not a function, a ``criterion`` without ``backward`` or with
            ``reduction="none"``, an optimizer with a parameter that is not the model's, a
            ``history`` that is not this model's record of ``start_step`` steps (its loss count,
            log steps, parameter shapes, or its last logged weights differ), a weight that is NaN or
            inf before the first step (nothing is trained).
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
    if history is None and start_step > 0:  # the record would miss its first start_step losses
        raise ConfigError(
            f"fit: start_step={start_step} needs history=, the History of the run's first {start_step} steps "
            "(a History holds one loss per step from step 0; a new run starts at start_step=0)"
        )
    if history is None:
        history = History.begin(model)
    else:
        _check_given_history(history, model, start_step, criterion)
    check_weights_finite(model, "fit")
    optimizer.zero_grad()
    for step in range(start_step, steps):
        raise_if_pressed()  # a Ctrl-C the command line's handler could not deliver (npattn._interrupts)
        batch = batches(step)
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            got = type(batch).__name__ + (f" of {len(batch)}" if isinstance(batch, (tuple, list)) else "")
            raise ConfigError(f"fit: batches({step}) must return (x, target), got {got}")
        x, target = batch
        try:
            output = model(x)
            loss = criterion(output, target)
        except (ShapeError, DTypeError) as exc:  # say where the run stopped and what it holds
            held = "no step of this call was applied" if step == start_step else f"the model holds {step} steps"
            raise type(exc)(f"fit: the batch of step {step}, batches({step}): {exc} ({held})") from None
        model.backward(criterion.backward())
        check_finite(model, loss, step, _hint(x, target))
        optimizer.step()
        check_updated(model, step)
        optimizer.zero_grad()
        history.loss.append(float(loss))
        done = step + 1
        logged = bool((log_every and done % log_every == 0) or done == steps)
        if logged:
            before = dict(history.last_log)
            history.log(model, done)
            if on_log:
                on_log(done, float(loss), history)
        if on_step:
            on_step(done, history)
            if logged and history.logged_other_weights(model):  # on_step changed them (clipping, a max-norm)
                history.unlog(before)
                history.log(model, done)  # the log describes the weights the step ends with
    return history


def _check_given_history(history: History, model: Module, start_step: int, criterion: Loss) -> None:
    """The history ``fit`` continues is this model's record of ``start_step`` steps."""
    where = f"fit (start_step={start_step})"
    check_history_of(history, model, start_step, ConfigError, where)
    negative = [i for i, loss in enumerate(history.loss) if loss < 0]
    if negative and isinstance(criterion, (MSELoss, CrossEntropyLoss)):  # a loss of one's own may go below 0
        raise ConfigError(
            f"{where}: history.loss[{negative[0]}] is {history.loss[negative[0]]}, but {type(criterion).__name__} "
            "is >= 0 (the history was edited or belongs to another run)"
        )
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
