"""Training without PyTorch: a readable fit loop, a SciPy L-BFGS trainer, and checkpointed runs.

The loop is the one every PyTorch user knows, with backward done by hand::

    for step in range(steps):
        x, target = batch(step)
        output = model(x)                       # forward
        loss = criterion(output, target)        # loss
        model.backward(criterion.backward())    # backward: fills W_query.grad, W_key.grad, ...
        optimizer.step()                        # adjust the weights
        optimizer.zero_grad()

``fit`` adds a history (the loss of every step; per parameter, how far it has moved since the
start and since the last log) and stops with ``TrainingError`` before any weight changes if the
loss or a gradient stops being finite. ``fit_lbfgs`` hands the same hand-derived gradients to
``scipy.optimize.minimize(method="L-BFGS-B", jac=True)``. ``train_task`` runs a task from
``npattn.tasks`` with checkpoints that resume exactly (model, optimizer state, history, step).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from npattn import checkpoint
from npattn.errors import CheckpointError, ConfigError, NpattnError, TrainingError
from npattn.losses import Loss
from npattn.module import Module
from npattn.optim import SGD, Adam, AdamW, Optimizer
from npattn.tasks import make_task

__all__ = [
    "OPTIMIZERS",
    "History",
    "fit",
    "fit_lbfgs",
    "progress_header",
    "progress_line",
    "run_train_command",
    "train_task",
]

Batches = Callable[[int], tuple[np.ndarray, Any]]
OPTIMIZERS: dict[str, Callable[..., Optimizer]] = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


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
    def from_state_dict(cls, state: dict[str, Any]) -> History:
        return cls(
            loss=[float(v) for v in state["loss"]],
            log_steps=[int(v) for v in state["log_steps"]],
            moved_from_start={k: [float(x) for x in v] for k, v in state["moved_from_start"].items()},
            moved_since_log={k: [float(x) for x in v] for k, v in state["moved_since_log"].items()},
            start={k: np.array(v) for k, v in state["start"].items()},
            last_log={k: np.array(v) for k, v in state["last_log"].items()},
        )


def _check_finite(model: Module, loss: float, step: int) -> None:
    """Raise TrainingError (naming the step and the culprit) if the loss or a gradient is not finite."""
    problem = None
    if not np.isfinite(loss):
        problem = f"the loss is {loss}"
    else:
        for name, p in model.named_parameters():
            bad = p.grad.size - int(np.count_nonzero(np.isfinite(p.grad)))
            if bad:
                problem = f"the gradient of {name} has {bad} non-finite entries (loss {loss:.6g})"
                break
    if problem:
        raise TrainingError(
            f"training stopped at step {step}: {problem}. The weights were not updated (they hold the values "
            "after the previous step) and the last checkpoint, if any, is untouched; try a smaller learning rate."
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
        TrainingError: the loss or a gradient became NaN or inf (the weights keep their last
            finite values; nothing after the failing step runs).
    """
    history = history if history is not None else History.begin(model)
    optimizer.zero_grad()
    for step in range(start_step, steps):
        x, target = batches(step)
        output = model(x)
        loss = criterion(output, target)
        model.backward(criterion.backward())
        _check_finite(model, loss, step)
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


def fit_lbfgs(
    model: Module,
    criterion: Loss,
    x: np.ndarray,
    target: Any,
    *,
    maxiter: int = 200,
    gtol: float = 1e-10,
    ftol: float = 1e-15,
) -> tuple[History, Any]:
    """Minimise ``criterion(model(x), target)`` over all parameters with SciPy's L-BFGS-B.

    The parameters are flattened into one vector theta; ``fun(theta)`` writes theta into them,
    runs forward, loss and the hand-derived backward, and returns (loss, flattened gradient)
    (``jac=True``). A wrong gradient makes L-BFGS stall, so this is also a test of backward.
    Returns (history: ``loss[i]`` after i iterations, from the start, and the moved norms; scipy's result);
    the model holds the best parameters found.

    Raises:
        TrainingError: the loss or gradient became non-finite (the model keeps its last finite values).
    """
    from scipy.optimize import minimize  # SciPy is a runtime dependency; imported here to keep startup quick

    params = list(model.parameters())
    shapes = [p.shape for p in params]
    sizes = [p.size for p in params]
    history = History.begin(model)

    def unflatten(theta: np.ndarray) -> None:
        for p, chunk, shape in zip(params, np.split(theta, np.cumsum(sizes)[:-1]), shapes):
            p.data = chunk.reshape(shape).astype(p.dtype)

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        unflatten(theta)
        model.zero_grad()
        loss = criterion(model(x), target)
        model.backward(criterion.backward())
        _check_finite(model, loss, max(len(history.loss) - 1, 0))
        return float(loss), np.concatenate([p.grad.ravel() for p in params]).astype(np.float64)

    def callback(intermediate_result: Any) -> None:
        history.loss.append(float(intermediate_result.fun))
        unflatten(intermediate_result.x)
        history.log(model, len(history.loss) - 1)

    theta0 = np.concatenate([p.data.ravel() for p in params]).astype(np.float64)
    history.loss.append(fun(theta0)[0])
    result = minimize(
        fun,
        theta0,
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxiter": maxiter, "gtol": gtol, "ftol": ftol},
    )
    unflatten(result.x)
    model.zero_grad()
    return history, result


# ----------------------------------------------------------------------------------------------
# Checkpointed runs of a task (what ``npattn train`` calls).


def _run_config(task: str, optimizer: str, lr: float, steps: int, seed: int) -> dict[str, Any]:
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZERS)}")
    return {"task": task, "optimizer": optimizer, "lr": float(lr), "seed": int(seed), "steps": int(steps)}


def train_task(
    task: str = "selective-copy",
    *,
    optimizer: str = "adam",
    lr: float = 0.05,
    steps: int = 300,
    seed: int = 123,
    save: str | os.PathLike[str] | None = None,
    save_every: int = 0,
    resume: str | os.PathLike[str] | None = None,
    log_every: int = 0,
    on_log: Callable[[int, float, History], None] | None = None,
) -> tuple[Module, Optimizer, History, Any]:
    """Train ``SelfAttention_v1`` on a named task for ``steps`` steps in total; returns
    (model, optimizer, history, task).

    ``save``: write a checkpoint there every ``save_every`` steps (0: only at the end). It holds
    the model's and the optimizer's state dicts, the history and the step count (the data position:
    batch t depends only on the seed and t). ``resume``: continue the run in that checkpoint up to
    ``steps`` total, with the task, optimizer, lr and seed stored in it; the result equals an
    uninterrupted run bit for bit.

    Raises:
        ConfigError: unknown task or optimizer, ``steps`` below a resumed run's step count, or a
            ``save`` path ending in .safetensors (that format holds only flat weights).
        CheckpointError: an unreadable checkpoint, or one of another run.
        TrainingError: non-finite loss or gradient (the last checkpoint written stays as it was).
    """
    if save is not None and os.fspath(save).endswith(".safetensors"):
        raise ConfigError("a training checkpoint holds optimizer state and history: save it to a .npz path")
    start_step = 0
    if resume is not None:
        saved = checkpoint.load(resume)
        try:
            stored, start_step = saved["run"], int(saved["step"])
            run = _run_config(stored["task"], stored["optimizer"], stored["lr"], steps, stored["seed"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"{os.fspath(resume)!r} is not a training checkpoint (no 'run'/'step' entries)"
            ) from None
        if steps < start_step:
            raise ConfigError(f"steps={steps} is below the checkpoint's step count {start_step}")
    else:
        run = _run_config(task, optimizer, lr, steps, seed)
    the_task = make_task(run["task"], seed=run["seed"])
    model = the_task.make_model()
    opt = OPTIMIZERS[run["optimizer"]](model.parameters(), lr=run["lr"])
    history = None
    if resume is not None:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        history = History.from_state_dict(saved["history"])

    def save_checkpoint(step: int, hist: History) -> None:
        if save is not None and ((save_every and step % save_every == 0) or step == run["steps"]):
            state = {
                "run": run,
                "step": step,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "history": hist.state_dict(),
            }
            meta = {"class": type(model).__name__, "config": {"d_in": the_task.d_in, "d_out": the_task.d_out}}
            checkpoint.save(state, save, metadata=meta)

    history = fit(
        model,
        opt,
        the_task.criterion,
        the_task.batch,
        run["steps"],
        start_step=start_step,
        history=history,
        log_every=log_every,
        on_log=on_log,
        on_step=save_checkpoint,
    )
    return model, opt, history, the_task


def run_train_command(args: Any, out: TextIO) -> int:
    """``npattn train``: parse-free glue between the CLI options and ``train_task``.

    Prints a progress line every ``--log-every`` steps and the held-out evaluation at the end.
    Errors (bad checkpoint, non-finite loss, bad option) print one clear line to stderr and return 2.
    """
    defaults = {"task": "selective-copy", "optimizer": "adam", "lr": 0.05, "seed": 123}
    given = {k: getattr(args, k) for k in defaults if getattr(args, k) is not None}
    try:
        if args.resume is not None:
            loaded = checkpoint.load(args.resume)
            run = dict(loaded.get("run", {})) if isinstance(loaded, dict) else {}
            clash = {k: (v, run.get(k)) for k, v in given.items() if run.get(k) != v}
            if clash:
                raise ConfigError(
                    "--resume continues the stored run; these options differ from it: "
                    + ", ".join(f"--{k} {v!r} (checkpoint: {c!r})" for k, (v, c) in clash.items())
                )
        settings = {**defaults, **given}
        if args.resume is None:
            print(
                f"training SelfAttention_v1 on {settings['task']} with {settings['optimizer']}(lr={settings['lr']}), "
                f"seed {settings['seed']}, {args.steps} steps",
                file=out,
            )
        else:
            print(f"resuming {args.resume} up to step {args.steps}", file=out)
        print(progress_header(), file=out)

        def on_log(step: int, loss: float, history: History) -> None:
            print(progress_line(step, loss, history), file=out)

        with np.errstate(over="ignore", invalid="ignore"):  # a non-finite loss is reported by TrainingError
            model, _, _, task = train_task(
                settings["task"],
                optimizer=settings["optimizer"],
                lr=settings["lr"],
                steps=args.steps,
                seed=settings["seed"],
                save=args.save,
                save_every=args.save_every,
                resume=args.resume,
                log_every=args.log_every,
                on_log=on_log,
            )
    except NpattnError as exc:
        print(f"npattn train: error: {exc}", file=sys.stderr)
        return 2
    scores = task.evaluate(model)
    print("held-out: " + ", ".join(f"{k} {v:.6g}" for k, v in scores.items()), file=out)
    if args.save:
        print(f"saved {args.save}", file=out)
    return 0


def progress_header(names: tuple[str, ...] = ("W_query", "W_key", "W_value")) -> str:
    """The column titles above ``progress_line``."""
    return " step       loss   moved from start:" + "".join(f"{name:>9}" for name in names)


def progress_line(step: int, loss: float, history: History) -> str:
    """``step, loss, ||W - W_start||`` for every parameter, as the last log recorded them."""
    moved = "".join(f"{history.moved_from_start.get(name, [0.0])[-1]:9.3f}" for name in history.start)
    return f"{step:>5}  {loss:9.4g}  {'':>17}{moved}"
