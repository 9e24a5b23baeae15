"""The checks of a run that continues a history, shared by ``train_lm(history=...)`` and
``run_lm(resume=...)``: made before anything runs, so a refused call changes nothing."""

from __future__ import annotations

from typing import Any

from npattn.errors import CheckpointError, ConfigError

__all__ = ["check_continues"]


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
