"""A language-model run's record: ``LMHistory`` (the book's three lists, the steps they were taken
at, the samples and where the run stands), read back from a checkpoint with every entry checked,
its counters checked against the step count, and the progress line ``train_lm`` prints.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn.errors import CheckpointError

__all__ = ["LMHistory", "check_records", "differences", "progress_line"]


@dataclass
class LMHistory:
    """What ``train_lm`` did: at each evaluation (after ``eval_steps[i] + 1`` updates, the book's
    global_step), ``train_losses[i]``, ``val_losses[i]`` and ``track_tokens_seen[i]``; the samples
    generated after each epoch as (global_step, text); where the run stands (``global_step``,
    ``epoch`` and ``batch``, the next batch of that epoch; ``tokens_seen``; ``seconds`` of training);
    the ``shuffle``, ``seed`` and windows (SHA-256 of its dataset's windows) of the npattn DataLoader
    the run last trained on (``loader_shuffle``, ``loader_seed``, ``loader_windows``; None for
    another loader, or a history saved before they were recorded)."""

    train_losses: list[float] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    track_tokens_seen: list[int] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    samples: list[tuple[int, str]] = field(default_factory=list)
    global_step: int = -1
    epoch: int = 0
    batch: int = 0
    tokens_seen: int = 0
    seconds: float = 0.0
    loader_shuffle: bool | None = None
    loader_seed: int | None = None
    loader_windows: str | None = None

    def state_dict(self) -> dict[str, Any]:
        """Plain lists and numbers (for checkpoints)."""
        return {
            "train_losses": np.array(self.train_losses, dtype=np.float64),
            "val_losses": np.array(self.val_losses, dtype=np.float64),
            "track_tokens_seen": np.array(self.track_tokens_seen, dtype=np.int64),
            "eval_steps": np.array(self.eval_steps, dtype=np.int64),
            "samples": [[step, text] for step, text in self.samples],
            "global_step": self.global_step,
            "epoch": self.epoch,
            "batch": self.batch,
            "tokens_seen": self.tokens_seen,
            "seconds": self.seconds,
            "loader_shuffle": self.loader_shuffle,
            "loader_seed": self.loader_seed,
            "loader_windows": self.loader_windows,
        }

    @classmethod
    def from_state_dict(cls, state: Any) -> LMHistory:
        """The history ``state_dict`` gave, every entry checked (types, ranges, matching lengths).

        Raises:
            CheckpointError: a missing or extra entry, or one of the wrong type or out of range
                (the message names it), eval_steps, track_tokens_seen or the samples' steps decreasing.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(state, dict):
            raise CheckpointError(f"the history must be a dict of {names}, got {type(state).__name__}")
        optional = ("loader_shuffle", "loader_seed", "loader_windows")  # absent from histories saved before them
        missing = [k for k in names if k not in state and k not in optional]
        extra = sorted(str(k) for k in state if k not in names)
        if missing or extra:
            raise CheckpointError(f"the history's entries differ from {names}: {differences(missing, extra)}")

        def number(key: str, value: Any, kind: type, low: float) -> Any:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
            if kind is int:
                ok = ok and float(value).is_integer()
            if not ok or not np.isfinite(float(value)) or value < low:
                bound = f" >= {low:g}" if np.isfinite(low) else ""
                raise CheckpointError(
                    f"history.{key} must be a finite {'integer' if kind is int else 'number'}{bound}, got {value!r}"
                )
            return kind(value)

        def numbers(key: str, kind: type, low: float) -> list[Any]:
            values = state[key]
            if isinstance(values, np.ndarray) and values.ndim == 1:
                values = values.tolist()
            if not isinstance(values, list):
                raise CheckpointError(f"history.{key} must be a list of numbers, got {type(values).__name__}")
            return [number(f"{key}[{i}]", v, kind, low) for i, v in enumerate(values)]

        def samples() -> list[tuple[int, str]]:
            values = state["samples"]
            if not isinstance(values, list) or not all(
                isinstance(v, list) and len(v) == 2 and isinstance(v[1], str) for v in values
            ):
                raise CheckpointError("history.samples must be a list of [global_step, text] pairs")
            return [(number(f"samples[{i}][0]", v[0], int, -1), v[1]) for i, v in enumerate(values)]

        history = cls(
            train_losses=numbers("train_losses", float, 0.0),  # cross-entropies: never below 0
            val_losses=numbers("val_losses", float, 0.0),
            track_tokens_seen=numbers("track_tokens_seen", int, 0),
            eval_steps=numbers("eval_steps", int, -1),
            samples=samples(),
            global_step=number("global_step", state["global_step"], int, -1),
            epoch=number("epoch", state["epoch"], int, 0),
            batch=number("batch", state["batch"], int, 0),
            tokens_seen=number("tokens_seen", state["tokens_seen"], int, 0),
            seconds=number("seconds", state["seconds"], float, 0),
        )
        shuffle, seed = state.get("loader_shuffle"), state.get("loader_seed")
        if shuffle is not None and not isinstance(shuffle, (bool, np.bool_)):
            raise CheckpointError(f"history.loader_shuffle must be True, False or None, got {shuffle!r}")
        history.loader_shuffle = None if shuffle is None else bool(shuffle)
        history.loader_seed = None if seed is None else number("loader_seed", seed, int, 0)
        windows = state.get("loader_windows")
        if windows is not None and not (isinstance(windows, str) and re.fullmatch("[0-9a-f]{64}", windows)):
            raise CheckpointError(f"history.loader_windows must be a SHA-256 in hex or None, got {windows!r:.80}")
        history.loader_windows = windows
        lengths = {len(getattr(history, k)) for k in ("train_losses", "val_losses", "track_tokens_seen", "eval_steps")}
        if len(lengths) != 1:
            raise CheckpointError(
                "history.train_losses, val_losses, track_tokens_seen and eval_steps must have one entry per "
                f"evaluation, got lengths {sorted(lengths)}"
            )
        sample_steps = [step for step, _ in history.samples]
        for key, values in (("eval_steps", history.eval_steps), ("track_tokens_seen", history.track_tokens_seen),
                            ("samples' steps", sample_steps)):
            drops = [i for i in range(1, len(values)) if values[i] < values[i - 1]]
            if drops:
                i = drops[0]
                raise CheckpointError(
                    f"history.{key} must not decrease (they are recorded as the run goes on), got {values[i - 1]} "
                    f"then {values[i]} at index {i}"
                )
        return history

    def check_counts(self, steps_per_epoch: int, tokens_per_batch: int) -> None:
        """The counters agree with the step count: ``epoch * steps_per_epoch + batch`` and
        ``tokens_seen / tokens_per_batch`` are ``global_step + 1`` (every training batch is full, the
        book's drop_last), each evaluation's tokens match its step, nothing is recorded after it.

        Raises:
            CheckpointError: naming the counter, the expected and the actual value.
        """
        _check_counts(self, steps_per_epoch, tokens_per_batch)


def check_records(history: LMHistory, error: type[Exception] = CheckpointError, where: str = "") -> None:
    """What any loader gives (``train_lm`` checks a history given to it so): nothing recorded after
    ``global_step``, and an evaluation at ``global_step`` records the ``tokens_seen`` the history
    stands at (later ones cannot count fewer than earlier ones: ``from_state_dict``).

    Raises:
        ``error``: naming the entry, begun with ``where``.
    """
    late = [step for step in [*history.eval_steps, *(s for s, _ in history.samples)] if step > history.global_step]
    if late:
        raise error(
            f"{where}the history records evaluations or samples at step {late[0]}, after its global_step "
            f"{history.global_step}"
        )
    for i, (step, seen) in enumerate(zip(history.eval_steps, history.track_tokens_seen)):
        if step == history.global_step and seen != history.tokens_seen:
            raise error(
                f"{where}history.track_tokens_seen[{i}] is {seen}, but its evaluation (eval_steps[{i}]) is at the "
                f"history's global_step {step}, which counts tokens_seen {history.tokens_seen}"
            )
        if seen > history.tokens_seen:
            raise error(
                f"{where}history.track_tokens_seen[{i}] is {seen}, more than the {history.tokens_seen} tokens the "
                "history has seen (tokens_seen)"
            )


def _check_counts(history: LMHistory, steps_per_epoch: int, tokens_per_batch: int) -> None:
    """``history.check_counts``: the counters a run of ``global_step + 1`` full batches gives."""
    done = history.global_step + 1
    at = history.epoch * steps_per_epoch + history.batch
    if at != done:
        raise CheckpointError(
            f"history.epoch {history.epoch} and history.batch {history.batch} place the run after {at} steps "
            f"({steps_per_epoch} per epoch); expected {done}, the count history.global_step {history.global_step} gives"
        )
    def check_tokens(counter: str, got: int, step: int) -> None:
        if got != (step + 1) * tokens_per_batch:
            raise CheckpointError(
                f"history.{counter} is {got}; expected {(step + 1) * tokens_per_batch} "
                f"({step + 1} steps of {tokens_per_batch} tokens)"
            )

    check_tokens("tokens_seen", history.tokens_seen, history.global_step)
    # after the counters (an edited counter is named as that), before each evaluation's tokens (an
    # evaluation moved past global_step is named as that, not by its token count)
    check_records(history)
    for i, (step, seen) in enumerate(zip(history.eval_steps, history.track_tokens_seen)):
        check_tokens(f"track_tokens_seen[{i}]", seen, step)

def differences(missing: list[str], extra: list[str]) -> str:
    """``missing ['a']; unexpected ['b']``, each part only when it is not empty."""
    parts = [f"missing {missing}"] * bool(missing) + [f"unexpected {extra}"] * bool(extra)
    return "; ".join(parts)


def progress_line(epoch: int, history: LMHistory) -> str:
    """The book's line, plus the tokens seen and the time: ``Ep 1 (Step 000000): Train loss 9.817,
    Val loss 9.924, tokens seen 1024, 0.4 s``."""
    step = f"Step {history.global_step:06d}" if history.global_step >= 0 else "before training"
    return (
        f"Ep {epoch + 1} ({step}): Train loss {history.train_losses[-1]:.3f}, "
        f"Val loss {history.val_losses[-1]:.3f}, tokens seen {history.track_tokens_seen[-1]}, "
        f"{history.seconds:.1f} s"
    )
