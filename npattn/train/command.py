"""Checkpointed runs of a task: ``train_task`` (model, optimizer state, history and step resume
exactly) and ``npattn train``'s glue, ``run_train_command``."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from npattn._checks import check_nonnegative_int, check_seed
from npattn.errors import CheckpointError, ConfigError, NpattnError, StateDictError, TrainingError
from npattn.nn.module import Module, Parameter
from npattn.optim import SGD, Adam, AdamW, Optimizer
from npattn.train import atomic, checkpoint, digest
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.loop import (
    History,
    check_callback,
    check_history,
    check_history_of,
    check_optimizer_settings,
    check_optimizer_steps,
    fit,
    history_weights_problem,
    progress_header,
    progress_line,
)
from npattn.train.resume import check_resumed_settings, plain_setting
from npattn.train.runsave import RunProgress, interrupt_before_the_first_step
from npattn.train.tasks import TASKS, make_task

__all__ = [
    "DEFAULTS",
    "LM_OPTIONS",
    "OPTIMIZERS",
    "run_lm_command",
    "run_train_command",
    "train_task",
]

OPTIMIZERS: dict[str, Callable[..., Optimizer]] = {"sgd": SGD, "adam": Adam, "adamw": AdamW}
LM_OPTIONS = (*tuple(f.name for f in dataclasses.fields(LMSettings) if f.name not in ("lr", "seed", "steps")), "plot")
"""The options of ``npattn train`` that only the language-model task (``--task lm``) takes."""


RUN_KEYS = ("task", "optimizer", "lr", "seed", "steps", "log_every")
ADDED_RUN_KEYS = ("log_every",)  # absent from checkpoints written before it was stored (see StoredOr)


@dataclasses.dataclass(frozen=True)
class StoredOr:
    """``train_task(log_every=StoredOr(30))``: the resumed checkpoint's log_every, or ``value`` for a
    checkpoint written before it was stored (``npattn train``'s default; ``train_task``'s is 0)."""

    value: int
CHECKPOINT_KEYS = ("run", "step", "model", "optimizer", "history")


DEFAULT_STEPS = 300
"""``train_task``'s and ``npattn train``'s total step count when none is given, also on resume."""
DEFAULTS = {"task": "selective-copy", "optimizer": "adam", "lr": 0.05, "seed": 123}
"""The run settings ``train_task`` and ``npattn train`` use when none is given (and no run is resumed)."""


class _Unset:
    """The default of ``train_task``'s run settings: ``DEFAULTS``, or a resumed checkpoint's. Not
    None, which a seed would read as "any seed"."""

    def __repr__(self) -> str:
        return "<the default, or the resumed checkpoint's>"


UNSET: Any = _Unset()


def _run_config(task: Any, optimizer: Any, lr: Any, steps: Any, seed: Any) -> dict[str, Any]:
    """The run's settings, checked (the seed by the task, the learning rate by the optimizer, in ``train_task``)."""
    if isinstance(task, str) and task == "lm":
        raise ConfigError(
            "train_task runs the attention tasks; a language model is trained by npattn.run_lm(settings) "
            "or npattn train --task lm"
        )
    if not isinstance(task, str) or task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose one of {sorted(TASKS)}")
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZERS)}")
    return {
        "task": str(task),  # np.str_ is a str: saved as a plain one
        "optimizer": str(optimizer),
        "lr": lr,
        "seed": seed,
        "steps": check_nonnegative_int(steps, "steps"),
    }


def _check_given(given: dict[str, Any]) -> None:
    """The settings given on resume, checked as a fresh run checks them (its messages), so a value
    a fresh run refuses is refused rather than compared with the checkpoint's."""
    settings = {**DEFAULTS, **given}
    _run_config(settings["task"], settings["optimizer"], settings["lr"], 0, settings["seed"])
    check_seed(settings["seed"])
    OPTIMIZERS[settings["optimizer"]]([Parameter(np.zeros(1))], lr=settings["lr"])


def _read_run(
    path: Any, steps: Any, given: dict[str, Any], before: int = 0
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """A training checkpoint's entries, its run settings (checked like new ones, and against the
    settings ``given``) and its step count. The caller's ``steps`` and ``given`` are checked first,
    as a fresh run checks them (ConfigError, its message): a bad value is the caller's, not the file's."""
    steps = check_nonnegative_int(steps, "steps")
    _check_given(given)
    saved = checkpoint.load(path)
    name = atomic.as_path(path)
    run = saved.get("run") if isinstance(saved, dict) else None
    if isinstance(run, dict) and run.get("task") == "lm":
        task = f"task {given['task']!r}" if "task" in given else "an attention task"
        raise CheckpointError(
            f"{name!r} is a checkpoint of a language-model run (npattn train --task lm), which {task} "
            "cannot continue: resume it with --task lm (or no --task), or with run_lm(..., resume=...) in Python"
        )
    if not isinstance(saved, dict) or not {"run", "step"} <= set(saved):
        raise CheckpointError(
            f"{name!r} is not a training checkpoint (no 'run'/'step' entries: a state dict saved with npattn.save?); "
            "resume a checkpoint that npattn train --save or train_task(save=) wrote"
        )
    saved = digest.verified(saved, name)
    odd = sorted(set(saved) ^ set(CHECKPOINT_KEYS))
    stored = saved["run"]
    if odd or not isinstance(stored, dict) or not set(RUN_KEYS) - set(ADDED_RUN_KEYS) <= set(stored) <= set(RUN_KEYS):
        raise CheckpointError(
            f"{name!r} is not a checkpoint npattn train wrote: expected the entries {list(CHECKPOINT_KEYS)} "
            f"and run settings {list(RUN_KEYS)}"
        )
    check_resumed_settings(given, stored, lambda k: f"--{k}")
    try:
        run = _run_config(stored["task"], stored["optimizer"], stored["lr"], steps, stored["seed"])
        run["log_every"] = check_nonnegative_int(stored.get("log_every", before), "log_every")
        start_step = check_nonnegative_int(saved["step"], "the checkpoint's step")
    except ConfigError as exc:
        raise CheckpointError(f"{name!r} holds a bad run setting: {exc}") from None
    if run["steps"] < start_step:
        raise ConfigError(
            f"steps={run['steps']} is below the checkpoint's step count {start_step}: steps (--steps) is the "
            f"total to reach, {DEFAULT_STEPS} when not given, also on resume; give at least {start_step}"
        )
    return saved, run, start_step


def _restore(
    saved: dict[str, Any], name: str, model: Module, opt: Optimizer, initial: dict[str, np.ndarray], step: int
) -> History:
    """Load the model, the optimizer and the history; everything is checked before training starts.
    ``initial``: the weights the run's seed and task build."""
    try:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
    except StateDictError as exc:
        raise CheckpointError(f"{name!r}: {exc}") from None
    check_optimizer_settings(opt, name)
    try:
        history = History.from_state_dict(saved["history"])
    except CheckpointError as exc:
        raise CheckpointError(f"{name!r}: {exc}") from None
    check_history(history, name)
    check_history_of(history, model, step, CheckpointError, repr(name))
    check_optimizer_steps(opt, step, name)
    _check_logged_weights(history, model, initial, step, name)
    return history


def _given_a_copy(
    on_log: Callable[[int, float, History], None], progress: RunProgress
) -> Callable[[int, float, History], None]:
    """``on_log`` as ``train_task`` calls it: with a copy of the history, so what a callback does
    to the history it is given never reaches the run's record or its checkpoints; the run's step
    is the logged one while it runs (a Ctrl-C in it is reported at that step)."""

    def call(step: int, loss: float, history: History) -> None:
        progress.step = step
        on_log(step, loss, history.copy())

    return call


def _check_state_to_save(
    history: History, model: Module, opt: Optimizer, lr: float, initial: dict[str, np.ndarray], step: int
) -> None:
    """The history and the optimizer a save is about to write pass the checks its resume makes
    (``_restore``; the optimizer built with the run's ``lr``), so a run never writes a checkpoint it
    would refuse (``on_log`` is given a copy of the history, so nothing should have changed it;
    code that reaches the optimizer or the model can).

    Raises:
        TrainingError: naming the step and the entry; nothing is written.
    """
    marker = "history"
    try:
        if opt.defaults["lr"] != lr:
            raise CheckpointError(f"the optimizer's default lr {opt.defaults['lr']} differs from the run's lr {lr}")
        check_optimizer_settings(opt, marker)
        check_optimizer_steps(opt, step, marker)
        restored = History.from_state_dict(history.state_dict())
        check_history(restored, marker)
        check_history_of(restored, model, step, CheckpointError, repr(marker))
        _check_logged_weights(restored, model, initial, step, marker)
    except CheckpointError as exc:
        problem = str(exc).removeprefix(f"{marker!r}: ")
        raise TrainingError(
            f"training stopped at step {step}: {problem}; the run's state was changed outside its own steps "
            "(the model's weights, the optimizer's settings or state, or the history), so a checkpoint of it "
            "would not resume and was not written"
        ) from None


def _check_logged_weights(
    history: History, model: Module, initial: dict[str, np.ndarray], step: int, name: str
) -> None:
    """The history's weights and distances are the ones the run made, where they can be rebuilt
    (exactly: the run computed them the same way). ``start`` is the initial weights the run's seed
    and task build; ``last_log`` is ``start`` before the first log, else the weights of the last
    log (``history_weights_problem``: weights that stopped moving, with gradients of exactly 0, may
    equal the last log's after it too).

    Raises:
        CheckpointError: naming the checkpoint ``name`` and the history entry.
    """
    for key, p in model.named_parameters():
        wrong = None
        if not np.array_equal(history.start[key], initial[key]):
            wrong = f"history.start[{key!r}] is not the initial weights the run's seed and task build"
        elif problem := history_weights_problem(history, key, p.data, step):
            wrong = problem
        if wrong:
            raise CheckpointError(f"{name!r}: {wrong}; the history was edited or belongs to another run")


def _finite_state(model: Module, opt: Optimizer) -> str | None:
    """The name of the first parameter or optimizer buffer holding NaN or inf, else None."""
    for name, p in model.named_parameters():
        if not np.isfinite(p.data).all():
            return name
    for i, buffers in opt.state_dict()["state"].items():
        for key, value in buffers.items():
            if isinstance(value, np.ndarray) and not np.isfinite(value).all():
                return f"the optimizer's {key} of parameter {i}"
    return None


@interrupt_before_the_first_step
def train_task(
    task: str = UNSET,
    *,
    optimizer: str = UNSET,
    lr: float = UNSET,
    steps: int = DEFAULT_STEPS,
    seed: int = UNSET,
    save: str | os.PathLike[str] | None = None,
    save_every: int = 0,
    resume: str | os.PathLike[str] | None = None,
    log_every: int | StoredOr = UNSET,
    on_log: Callable[[int, float, History], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> tuple[Module, Optimizer, History, Any]:
    """Train ``SelfAttention_v1`` on a named task for ``steps`` steps in total; returns
    (model, optimizer, history, task).

    ``save``: write a checkpoint there every ``save_every`` steps (0: only at the end) and always
    at the end, also when no step was left to run. It holds the model's and the optimizer's state
    dicts, the history and the step count (the data position: batch t depends only on the seed and
    t). ``task``, ``optimizer``, ``lr``, ``seed`` not given: the defaults (``DEFAULTS``:
    selective-copy, adam, 0.05, 123). ``resume``: continue the run in that checkpoint up to
    ``steps`` total, with the task, optimizer, lr and seed stored in it (any of them given must
    equal the stored one); the result equals an uninterrupted run bit for bit.
    Every argument, the save target and the resumed checkpoint are checked before the first step;
    ``on_start()`` runs then (``npattn train`` prints its header there, so an error comes alone).
    ``on_log(step, loss, history)`` is called at every log (every ``log_every`` steps; 0: none; not
    given: 0, or on resume the run's own, which the checkpoint stores, 0 for a checkpoint written
    before it did; ``StoredOr(n)``: the run's own, n for such a checkpoint or a new run) with a copy
    of the history.

    Raises:
        ConfigError: unknown task or optimizer, a learning rate the optimizer refuses, a negative
            or non-integer steps/seed/save_every/log_every, ``save_every`` without ``save``,
            ``on_log``/``on_start`` not a function, ``steps`` below a resumed run's step count, a
            task, optimizer, lr or seed that contradicts the resumed checkpoint, or a ``save``
            path that does not end in .npz (one rule with run_lm).
        CheckpointError: an unreadable checkpoint, one of another kind or with bad settings, or a
            ``save`` target that cannot be written (a directory, a device, a missing folder).
        TrainingError: a non-finite loss or gradient, or an update that made the weights
            non-finite; the message says which checkpoint, if any, this run wrote last.
    """
    save_every = check_nonnegative_int(save_every, "save_every")
    before = 0  # a resumed checkpoint without a stored log_every: train_task's default
    if isinstance(log_every, StoredOr):
        before, log_every = check_nonnegative_int(log_every.value, "log_every"), UNSET
    if log_every is not UNSET:
        log_every = check_nonnegative_int(log_every, "log_every")
    check_callback(on_log, "on_log", "step, loss, history")
    check_callback(on_start, "on_start", "")
    given = {k: v for k, v in dict(task=task, optimizer=optimizer, lr=lr, seed=seed).items() if v is not UNSET}
    if save is None and save_every:
        raise ConfigError(f"save_every={save_every} needs a save path (--save FILE)")
    if save is not None:
        atomic.check_run_target(save, holds=False)  # what it holds: after the resume is read
    start_step = 0
    if resume is not None:
        saved, run, start_step = _read_run(resume, steps, given, before)
    else:
        settings = {**DEFAULTS, **given}
        run = _run_config(settings["task"], settings["optimizer"], settings["lr"], steps, settings["seed"])
        run["log_every"] = before
    if log_every is not UNSET:  # given: this run's (a resumed run may report differently); else the stored one
        run["log_every"] = log_every
    if save is not None:  # resuming in place: a bad file is named as the resume it is, not as a save target
        atomic.check_run_target(save)
    try:
        the_task = make_task(run["task"], seed=run["seed"])
        model = the_task.make_model()
        opt = OPTIMIZERS[run["optimizer"]](model.parameters(), lr=run["lr"])
    except ConfigError as exc:
        if resume is None:
            raise
        raise CheckpointError(f"{atomic.as_path(resume)!r} holds a bad run setting: {exc}") from None
    run["lr"], run["seed"] = opt.defaults["lr"], the_task.seed  # checked: a float and an int now
    run = {key: plain_setting(value, key) for key, value in run.items()}  # what is saved is what was checked
    history = None
    initial = {key: p.data.copy() for key, p in model.named_parameters()}  # what the run's seed and task build
    if resume is not None:
        history = _restore(saved, atomic.as_path(resume), model, opt, initial, start_step)
    progress = RunProgress(start_step, None if save is None else atomic.as_path(save))
    if on_start is not None:
        on_start()

    def save_checkpoint(step: int, hist: History) -> None:
        progress.step = step
        if save is not None and ((save_every and step % save_every == 0) or step == run["steps"]):
            bad = _finite_state(model, opt)
            if bad is not None:
                raise TrainingError(
                    f"training stopped at step {step}: the update made {bad} non-finite, so it was not saved"
                )
            _check_state_to_save(hist, model, opt, run["lr"], initial, step)
            state = digest.stamped({
                "run": run,
                "step": step,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "history": hist.state_dict(),
            })
            config = {"d_in": the_task.d_in, "d_out": the_task.d_out}
            progress.save_run(step, state, type(model).__name__, config)

    try:
        with progress.interrupts():
            history = fit(
                model,
                opt,
                the_task.criterion,
                the_task.batch,
                run["steps"],
                start_step=start_step,
                history=history,
                log_every=run["log_every"],
                on_log=None if on_log is None else _given_a_copy(on_log, progress),
                on_step=save_checkpoint,
            )
            if start_step == run["steps"]:  # no step left to run: the checkpoint is written all the same
                save_checkpoint(run["steps"], history)
    except (TrainingError, CheckpointError) as exc:  # a failed step, or a save the OS refused mid-run
        if save is None:
            raise
        raise type(exc)(progress.after(exc)) from None
    return model, opt, history, the_task


def run_train_command(args: Any, out: TextIO) -> int:
    """``npattn train``: parse-free glue between the CLI options and ``train_task``.

    Prints a progress line every ``--log-every`` steps, the held-out evaluation at the end, and
    ``saved FILE`` once the checkpoint is written.

    Raises:
        NpattnError: a bad option or checkpoint, a non-finite loss (the command prints one line and
            exits with 2).
    """
    given = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
    if _is_lm_run(args):
        return run_lm_command(args, out)
    lm_only = [f"--{k.replace('_', '-')}" for k in LM_OPTIONS if getattr(args, k, None) is not None]
    if lm_only:
        raise ConfigError(f"{', '.join(lm_only)}: only for --task lm")
    args.steps = DEFAULT_STEPS if args.steps is None else args.steps
    if args.log_every is None:  # a resumed run goes on with its stored --log-every
        args.log_every = 30 if args.resume is None else StoredOr(30)
    settings = {**DEFAULTS, **given}

    def on_start() -> None:
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
            **given,  # the options given; the others are the defaults, or the resumed checkpoint's
            steps=args.steps,
            save=args.save,
            save_every=args.save_every,
            resume=args.resume,
            log_every=args.log_every,
            on_log=on_log,
            on_start=on_start,
        )
    scores = task.evaluate(model)
    print("held-out: " + ", ".join(f"{k} {v:.6g}" for k, v in scores.items()), file=out)
    _say_saved(args, out)
    return 0


def _say_saved(args: Any, out: TextIO) -> None:
    """``saved FILE``; a resumed run without ``--save`` says that its steps were not saved (the
    resumed checkpoint is left as it was)."""
    if args.save:
        print(f"saved {args.save}", file=out)
    elif args.resume is not None:
        print(f"not saved: no --save was given ({args.resume} is as it was; resume with --save FILE to keep the "
              "steps)", file=out)


def _is_lm_run(args: Any) -> bool:
    """``--task lm``, or ``--resume`` of a language-model checkpoint without ``--task``."""
    if args.task is not None or args.resume is None:
        return args.task == "lm"
    try:
        run = checkpoint.load(args.resume).get("run", {})
    except (NpattnError, AttributeError):
        return False  # the attention path reports the unreadable checkpoint
    return isinstance(run, dict) and run.get("task") == "lm"


def run_lm_command(args: Any, out: TextIO) -> int:
    """``npattn train --task lm``: a GPT on text (``run_lm``), a progress line per evaluation, a
    sample after each epoch, the checkpoint and the plot.

    Raises:
        NpattnError: a bad option, text or checkpoint, a non-finite loss (the command prints one line
            and exits with 2)."""
    if args.log_every is not None:
        raise ConfigError("--log-every is for the attention tasks; --task lm reports every --eval-every steps")
    if args.optimizer not in (None, "adamw"):
        raise ConfigError(f"--task lm trains with AdamW (the book's), got --optimizer {args.optimizer}")
    given = {k: getattr(args, k) for k in (*LM_OPTIONS, "lr", "seed", "steps") if k != "plot"}
    given = {k: v for k, v in given.items() if v is not None}
    started = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite loss is reported by TrainingError
        _, _, history = run_lm(
            given, save=args.save, save_every=args.save_every, resume=args.resume, plot=args.plot, out=out
        )
    wall = time.perf_counter() - started
    rate = f"{history.tokens_seen / history.seconds:,.0f} tokens/s" if history.seconds else "no step timed"
    print(
        f"done: {history.global_step + 1} steps, {history.tokens_seen:,} tokens; {history.seconds:.1f} s in training "
        f"steps ({rate}); this command took {wall:.1f} s; train loss {history.train_losses[0]:.3f} -> "
        f"{history.train_losses[-1]:.3f}, val loss {history.val_losses[0]:.3f} -> {history.val_losses[-1]:.3f}",
        file=out,
    )
    _say_saved(args, out)
    if args.plot:
        print(f"plotted {args.plot}", file=out)
    return 0
