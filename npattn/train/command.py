"""Checkpointed runs of a task: ``train_task`` (model, optimizer state, history and step resume
exactly) and ``npattn train``'s glue, ``run_train_command``."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from npattn.errors import CheckpointError, ConfigError, NpattnError
from npattn.nn.module import Module
from npattn.optim import SGD, Adam, AdamW, Optimizer
from npattn.train import checkpoint
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.loop import History, fit, progress_header, progress_line
from npattn.train.tasks import make_task

__all__ = ["LM_OPTIONS", "OPTIMIZERS", "run_lm_command", "run_train_command", "train_task"]

OPTIMIZERS: dict[str, Callable[..., Optimizer]] = {"sgd": SGD, "adam": Adam, "adamw": AdamW}
LM_OPTIONS = (*tuple(f.name for f in dataclasses.fields(LMSettings) if f.name not in ("lr", "seed", "steps")), "plot")
"""The options of ``npattn train`` that only the language-model task (``--task lm``) takes."""


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
        if _is_lm_run(args):
            return run_lm_command(args, out)
        lm_only = [f"--{k.replace('_', '-')}" for k in LM_OPTIONS if getattr(args, k, None) is not None]
        if lm_only:
            raise ConfigError(f"{', '.join(lm_only)}: only for --task lm")
        args.steps = 300 if args.steps is None else args.steps
        args.log_every = 30 if args.log_every is None else args.log_every
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
    sample after each epoch, the checkpoint and the plot. Errors print one line and return 2."""
    try:
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
    except NpattnError as exc:
        print(f"npattn train: error: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - started
    rate = history.tokens_seen / history.seconds if history.seconds else float("nan")
    print(
        f"done: {history.global_step + 1} steps, {history.tokens_seen:,} tokens; {history.seconds:.1f} s in training "
        f"steps ({rate:,.0f} tokens/s); this command took {wall:.1f} s; train loss {history.train_losses[0]:.3f} -> "
        f"{history.train_losses[-1]:.3f}, val loss {history.val_losses[0]:.3f} -> {history.val_losses[-1]:.3f}",
        file=out,
    )
    if args.save:
        print(f"saved {args.save}", file=out)
    if args.plot:
        print(f"plotted {args.plot}", file=out)
    return 0
