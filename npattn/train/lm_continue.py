"""The checks of a run that continues a history, shared by ``train_lm(history=...)`` and
``run_lm(resume=...)``: made before anything runs, so a refused call changes nothing."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from npattn.errors import CheckpointError, ConfigError

__all__ = ["check_continues", "check_same_order", "check_step_count", "check_tokens_fit", "windows_digest"]


def windows_digest(loader: Any) -> str | None:
    """SHA-256 (hex) of the windows an npattn DataLoader's epochs are made of (its dataset's
    ``input_ids`` and ``target_ids``: the text, the window length and the stride), or None for a
    loader whose dataset does not hold them."""
    dataset = getattr(loader, "dataset", None)
    inputs, targets = getattr(dataset, "input_ids", None), getattr(dataset, "target_ids", None)
    if not isinstance(inputs, np.ndarray) or not isinstance(targets, np.ndarray):
        return None
    digest = hashlib.sha256()
    for arr in (inputs, targets):
        digest.update(repr((arr.shape, arr.dtype.str)).encode())
        digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()


def check_continues(
    history: Any,
    steps_per_epoch: int,
    steps: int | None,
    epochs: int | None,
    where: str,
    names: tuple[str, str] = ("max_steps", "num_epochs"),
    source: str = "the history",
    hint: bool = True,
) -> None:
    """The history fits a loader of ``steps_per_epoch`` batches (its next batch lies inside an
    epoch), and the run asks for at least the steps and epochs already done (``names``: what the
    caller calls them; ``steps`` and ``epochs`` are totals, not what is left). ``hint``: say so in
    the messages, begun with ``where``, and that the loader must match (``train_lm``, whose caller
    passes the loader).

    Raises:
        CheckpointError: ``history.batch`` beyond the batches of an epoch. ConfigError: ``steps``
            below ``global_step + 1`` or ``epochs`` below ``history.epoch``.
    """
    loader = " (continue with a loader of as many batches per epoch as the one the history was made with)"
    if history.batch > steps_per_epoch:
        raise CheckpointError(
            f"{where}: history.batch {history.batch} is beyond the {steps_per_epoch} batches of an epoch"
            + loader * hint
        )
    done, at = history.global_step + 1, f"{where}: " * hint
    if steps is not None and steps < done:
        total = " (the total step count, not the steps left)" * hint
        raise ConfigError(f"{at}{names[0]}={steps} is below {source}'s step count {done}{total}")
    if epochs is not None and epochs < history.epoch:
        total = " (the total, not the epochs left)" * hint
        raise ConfigError(f"{at}{names[1]}={epochs} is below {source}'s epoch count {history.epoch}{total}")


def check_tokens_fit(history: Any, loader: Any, where: str) -> None:
    """A history that stands inside an epoch goes on with the loader it was made with: inside the
    first epoch the tokens it counts are the tokens ``loader`` (npattn's DataLoader) gives over its
    first ``batch`` batches; inside a later one at least those (earlier epochs may have had other
    loaders). A loader of another batch size, window length, stride or text would go on at another
    window than the run reached (batch 20 of batch size 8 is window 160, of batch size 4 window 80).
    At an epoch's start any loader may go on; other loaders are not checked (their sizes are unknown).

    Raises:
        ConfigError: naming the tokens the history counts and the tokens this loader gives.
    """
    dataset = getattr(loader, "dataset", None)
    length = getattr(dataset, "max_length", None)
    if history.batch == 0 or not hasattr(loader, "batches") or dataset is None or not isinstance(length, int):
        return  # at an epoch's start any loader may go on (a new text, another batch size): its windows start over
    n, b = len(dataset), loader.batch_size
    sizes = [min(b, n - i * b) for i in range(len(loader))]  # windows per batch (the last may be short)
    expected = sum(sizes[: history.batch]) * length  # this epoch's; earlier epochs may have had other loaders
    if (history.epoch == 0 and history.tokens_seen != expected) or history.tokens_seen < expected:
        raise ConfigError(
            f"{where}: the history stands at batch {history.batch} inside epoch {history.epoch} with "
            f"{history.tokens_seen} tokens counted, but this train_loader's first {history.batch} batches give "
            f"{expected} tokens ({n} windows "
            f"of {length} tokens per epoch, in batches of {b}); going on inside an epoch needs the loader the "
            "history was made with (the same text, stride, batch size and context length)"
        )


def check_step_count(history: Any, steps_per_epoch: int, where: str) -> None:
    """``history.global_step`` agrees with where the history stands: inside the first epoch (the
    loader the history was made with goes on) ``batch`` steps were taken, the count ``global_step +
    1`` gives; inside a later one at least one step per earlier epoch (each may have had another
    loader: at an epoch's start any loader may go on) plus ``batch``; at an epoch's start at least
    one step per epoch done. A count that disagrees would make
    ``max_steps`` stop the run after another number of updates than it says.

    Raises:
        ConfigError: naming the counters, the expected and the actual count.
    """
    done = history.global_step + 1
    if history.batch and history.epoch == 0:  # every step so far from this loader's first epoch
        at = history.batch
        if at != done:
            raise ConfigError(
                f"{where}: history.epoch {history.epoch} and history.batch {history.batch} place the run after {at} "
                f"steps ({steps_per_epoch} batches per epoch of this train_loader); expected {done}, the count "
                f"history.global_step {history.global_step} gives (a history edited, or made with another loader)"
            )
    elif history.batch and done < history.epoch + history.batch:  # earlier epochs: perhaps another loader
        raise ConfigError(
            f"{where}: history.epoch {history.epoch} and history.batch {history.batch} place the run after at "
            f"least {history.epoch + history.batch} steps; history.global_step {history.global_step} counts {done} "
            "(a history edited)"
        )
    elif not history.batch and (done < history.epoch or (history.epoch == 0 and done != 0)):
        least = "no step (epoch 0, batch 0)" if history.epoch == 0 else f"at least {history.epoch} steps"
        raise ConfigError(
            f"{where}: history.epoch {history.epoch} and history.batch 0 place the run after {least}; "
            f"history.global_step {history.global_step} counts {done} (a history edited)"
        )


def check_same_order(history: Any, loader: Any, where: str) -> None:
    """Inside an epoch, the loader goes on in the order the history's batches were drawn in: the
    ``shuffle``, (when shuffled) the ``seed`` and the windows (``windows_digest``) the history
    recorded of npattn's DataLoader. A history that recorded none (another loader, or saved before
    they were recorded) is not checked.

    Raises:
        ConfigError: naming the recorded and the given shuffle and seed.
    """
    if history.batch == 0 or history.loader_shuffle is None or not hasattr(loader, "batches"):
        return  # at an epoch's start any loader may go on
    shuffle, seed = getattr(loader, "shuffle", None), getattr(loader, "seed", None)
    same = shuffle == history.loader_shuffle and (not shuffle or seed == history.loader_seed)
    windows = windows_digest(loader)
    if same and history.loader_windows is not None and windows != history.loader_windows:
        raise ConfigError(
            f"{where}: the history stands at batch {history.batch} inside epoch {history.epoch} of a loader over "
            "other windows than this train_loader's (another text, window length or stride): going on inside the "
            "epoch would train on windows the run never reached in that order; continue with the loader the "
            "history was made with, or from an epoch's start"
        )
    if not same:
        raise ConfigError(
            f"{where}: the history stands at batch {history.batch} inside epoch {history.epoch} of a loader with "
            f"shuffle={history.loader_shuffle}, seed={history.loader_seed}, but this train_loader has "
            f"shuffle={shuffle}, seed={seed}: its epoch's batches come in another order, so going on inside the "
            "epoch would repeat some windows and skip others; continue with the loader the history was made with"
        )
