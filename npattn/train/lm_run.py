"""A whole language-model run from settings: text, tokenizer, GPT, AdamW, the chapter-5 loop,
checkpoints that resume, loss curves. ``npattn train --task lm`` is a thin layer over ``run_lm``.

A checkpoint (``.npz``, written atomically) holds the settings, the tokenizer (its JSON, so the
model always comes back with the tokenizer it was trained with), a SHA-256 of the text, the
model's and the optimizer's state dicts, the random stream of dropout and the history (with the
epoch and the batch the run stands at: the batches of an epoch depend only on the seed and the
epoch, so a resumed run continues with exactly the batches an uninterrupted one would use).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from npattn._checks import (
    check_bool,
    check_finite,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
    check_seed,
)
from npattn.errors import CheckpointError, ConfigError, NpattnError, TrainingError
from npattn.nn.gpt import GPTModel
from npattn.optim import AdamW
from npattn.optim.checks import as_number
from npattn.train import atomic, checkpoint, digest
from npattn.train.figures import check_plot_target
from npattn.train.lm import STDOUT, LMHistory, check_out, differences, train_lm
from npattn.train.lm_continue import check_continues
from npattn.train.lm_report import plot_losses, print_header
from npattn.train.lm_state import check_stored_dtypes, rng_state, set_rng_state
from npattn.train.loop import check_optimizer_settings, check_optimizer_steps
from npattn.train.resume import check_resumed_settings, plain_setting
from npattn.train.runsave import RunProgress, interrupt_before_the_first_step
from npattn.train.saveguard import SaveGuard
from npattn.train.tasks import TASKS
from npattn.train.text import (
    DataLoader,
    create_dataloader_v1,
    default_corpus,
    largest_stride,
    read_text,
    split_train_val,
)
from npattn.train.tokenizer_files import tokenizer_from_dict
from npattn.train.tokenizers import BPE_VOCAB_SIZE, TOKENIZER_KINDS, Tokenizer, train_tokenizer

__all__ = ["RESUMABLE", "LMSettings", "plot_losses", "run_lm"]


@dataclass(frozen=True)
class LMSettings:
    """Everything a run depends on. ``text`` None means the default corpus; ``vocab_size`` is the
    BPE's (default 1024); ``stride`` defaults to ``context_length`` (the book's non-overlapping
    windows); neither ``steps`` nor ``epochs`` means one epoch."""

    text: str | None = None
    tokenizer: str = "bpe"
    vocab_size: int | None = None
    context_length: int = 128
    emb_dim: int = 128
    n_heads: int = 4
    n_layers: int = 4
    drop_rate: float = 0.1
    qkv_bias: bool = False
    dtype: str = "float32"
    batch_size: int = 8
    stride: int | None = None
    lr: float = 0.0004
    weight_decay: float = 0.1
    seed: int = 123
    steps: int | None = None
    epochs: int | None = None
    eval_every: int = 50
    eval_iter: int = 5
    prompt: str = "The"
    sample_tokens: int = 50
    temperature: float = 0.0
    top_k: int | None = None

    def __post_init__(self) -> None:
        """Raises ConfigError naming the setting and its command-line option."""

        def name(field: str) -> str:
            return f"{field} (--{field.replace('_', '-')})"

        def put(field: str, value: Any) -> None:  # the checked value, a plain Python one (what is saved)
            object.__setattr__(self, field, value)

        for field in ("context_length", "emb_dim", "n_heads", "n_layers", "batch_size", "eval_every", "eval_iter"):
            put(field, check_positive_int(getattr(self, field), name(field)))
        for field in ("vocab_size", "stride", "epochs", "top_k"):
            if getattr(self, field) is not None:
                put(field, check_positive_int(getattr(self, field), name(field)))
        put("seed", check_seed(self.seed, name("seed")))
        put("sample_tokens", check_nonnegative_int(self.sample_tokens, name("sample_tokens")))
        if self.steps is not None:
            put("steps", check_nonnegative_int(self.steps, name("steps")))
        put("drop_rate", check_probability(self.drop_rate, name("drop_rate")))
        put("qkv_bias", check_bool(self.qkv_bias, name("qkv_bias")))
        for field in ("lr", "weight_decay", "temperature"):  # kept as Python floats: compared exactly on resume
            value = check_finite(as_number(getattr(self, field)), name(field))  # a 0-d tensor: its number
            if value < 0:
                raise ConfigError(f"{name(field)} must be >= 0, got {getattr(self, field)}")
            put(field, value)
        if self.tokenizer not in TOKENIZER_KINDS:
            raise ConfigError(
                f"unknown tokenizer {self.tokenizer!r} (--tokenizer); choose one of {', '.join(TOKENIZER_KINDS)}"
            )
        if self.vocab_size is not None and self.tokenizer != "bpe":
            raise ConfigError(f"vocab_size (--vocab-size) applies to the bpe tokenizer only, not {self.tokenizer}")
        if self.vocab_size is not None and self.vocab_size < 256:  # checked before the text is read
            raise ConfigError(
                f"vocab_size (--vocab-size) of a byte-level BPE must be at least 256 (the bytes), got {self.vocab_size}"
            )
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"dtype (--dtype) must be float32 or float64, got {self.dtype!r}")
        if self.emb_dim % self.n_heads:
            raise ConfigError(
                f"emb_dim (--emb-dim) {self.emb_dim} must be divisible by n_heads (--n-heads) {self.n_heads}"
            )
        if self.steps is not None and self.epochs is not None:
            raise ConfigError("give --steps or --epochs, not both")
        if self.text is not None and not isinstance(self.text, (str, os.PathLike)):
            raise ConfigError(f"text (--text) must be a file path (str) or None, got {type(self.text).__name__}")
        if isinstance(self.text, os.PathLike):
            object.__setattr__(self, "text", os.fspath(self.text))  # stored in checkpoints as a str
        if not isinstance(self.tokenizer, str):
            raise ConfigError(f"tokenizer (--tokenizer) must be a str, got {type(self.tokenizer).__name__}")
        if not isinstance(self.prompt, str) or not self.prompt:
            raise ConfigError("prompt (--prompt) must be a non-empty text")
        for field in ("text", "tokenizer", "dtype", "prompt"):  # np.str_ is a str: saved as one
            put(field, plain_setting(getattr(self, field), name(field)))


RESUMABLE = ("text", "steps", "epochs", "eval_every", "eval_iter", "prompt", "sample_tokens", "temperature", "top_k")
"""The settings a resumed run may change: how long it runs, how it reports, and where the text is
(its contents must be the same: the checkpoint keeps their SHA-256); the others are the run's."""


def _load_text(settings: LMSettings) -> tuple[str, str]:
    text = default_corpus() if settings.text is None else read_text(settings.text)
    return text, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _gpt_config(settings: LMSettings, vocab_size: int) -> dict[str, Any]:
    return {
        "vocab_size": vocab_size,
        "context_length": settings.context_length,
        "emb_dim": settings.emb_dim,
        "n_heads": settings.n_heads,
        "n_layers": settings.n_layers,
        "drop_rate": settings.drop_rate,
        "qkv_bias": settings.qkv_bias,
    }


def _loaders(text: str, tokenizer: Tokenizer, settings: LMSettings) -> tuple[DataLoader, DataLoader]:
    """The book's loaders: 90% of the text for training (shuffled, drop_last), 10% for validation."""
    train_text, val_text = split_train_val(text, 0.9)
    stride = settings.stride or settings.context_length
    common: dict[str, Any] = {
        "max_length": settings.context_length,
        "stride": stride,
        "tokenizer": tokenizer,
        "seed": settings.seed,
    }
    train_loader = create_dataloader_v1(train_text, settings.batch_size, shuffle=True, drop_last=True, **common)
    val_loader = create_dataloader_v1(val_text, settings.batch_size, shuffle=False, drop_last=False, **common)
    window = settings.context_length + 1
    if len(train_loader) == 0:
        dataset = train_loader.dataset
        fix = "a longer text, a shorter --context-length or a smaller --batch-size"
        largest = largest_stride(dataset, settings.batch_size)
        if largest is not None:  # the stride leaves too few windows: a smaller one gives a batch
            fix = f"--stride {largest}{' or less' * (largest > 1)}, or {fix}"
        raise ConfigError(
            f"the training text (the first 90% of the text: {len(dataset.token_ids)} tokens) gives no batch of "
            f"{settings.batch_size} windows of context_length + 1 = {window} tokens: a window starts every --stride "
            f"{stride} tokens{'' if settings.stride else ' (the context length, when not given)'}, which leaves "
            f"{len(dataset)} window{'s' * (len(dataset) != 1)}; use {fix}"
        )
    if len(val_loader) == 0:
        raise ConfigError(
            f"the validation text (the last 10%: {len(val_loader.dataset.token_ids)} tokens) is shorter than one "
            f"window of context_length + 1 = {window} tokens; use a longer text or a shorter --context-length"
        )
    return train_loader, val_loader


SETTINGS = tuple(f.name for f in dataclasses.fields(LMSettings))
CHECKPOINT_ENTRIES = ("run", "tokenizer", "model", "optimizer", "history", "dropout_rng")


def _check_given(given: Any) -> dict[str, Any]:
    """``given`` as a dict of ``LMSettings`` field names (their values are checked by ``LMSettings``)."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"run_lm's settings must be a dict of LMSettings fields, got {type(given).__name__}")
    unknown = sorted(str(k) for k in given if k not in SETTINGS)
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; LMSettings has {', '.join(SETTINGS)}")
    return dict(given)


def _read_checkpoint(path: Any) -> tuple[dict[str, Any], LMSettings, Tokenizer, LMHistory]:
    """A language-model checkpoint with every entry checked: the stored settings (each present and
    valid), the tokenizer, the history; the model, optimizer and dropout entries are checked when
    they are loaded, still before the first step."""
    saved = checkpoint.load(path)
    name = atomic.as_path(path)
    run = saved.get("run") if isinstance(saved, dict) else None
    if isinstance(run, dict) and isinstance(run.get("task"), str) and run["task"] in TASKS:
        raise CheckpointError(
            f"{name!r} is a checkpoint of an attention-task run (npattn train --task {run['task']}), which a "
            f"language-model run (--task lm) cannot continue: resume it with --task {run['task']} (or no --task), "
            "or with train_task(resume=...) in Python"
        )
    if not isinstance(run, dict) or run.get("task") != "lm" or not isinstance(run.get("settings"), dict):
        raise CheckpointError(f"{name!r} is not a checkpoint of a language-model run (npattn train --task lm)")
    saved = digest.verified(saved, name)
    missing = [k for k in CHECKPOINT_ENTRIES if k not in saved]
    extra = sorted(str(k) for k in saved if k not in CHECKPOINT_ENTRIES)
    if missing or extra:
        raise CheckpointError(
            f"{name!r}: expected the entries {list(CHECKPOINT_ENTRIES)}; {differences(missing, extra)}"
        )
    stored = run["settings"]
    missing = [k for k in SETTINGS if k not in stored]
    extra = sorted(str(k) for k in stored if k not in SETTINGS)
    if missing or extra:
        raise CheckpointError(
            f"{name!r}: its run settings must hold every LMSettings field; {differences(missing, extra)}"
        )
    if not isinstance(run.get("text_sha256"), str) or not isinstance(run.get("text_chars"), int):
        raise CheckpointError(f"{name!r}: run.text_sha256 (a str) and run.text_chars (an int) are missing or malformed")
    try:
        settings = LMSettings(**stored)
    except ConfigError as exc:
        raise CheckpointError(f"{name!r} holds a bad setting: {exc}") from None
    try:
        if not isinstance(saved["tokenizer"], str):
            raise ConfigError(f"a JSON text is expected, got {type(saved['tokenizer']).__name__}")
        tokenizer = tokenizer_from_dict(json.loads(saved["tokenizer"]))
    except (ConfigError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{name!r}: its tokenizer entry cannot be read: {exc}") from None
    if tokenizer.kind != settings.tokenizer:
        raise CheckpointError(f"{name!r}: its tokenizer is {tokenizer.kind}, its settings say {settings.tokenizer}")
    try:
        history = LMHistory.from_state_dict(saved["history"])
    except CheckpointError as exc:
        raise CheckpointError(f"{name!r}: {exc}") from None
    return saved, settings, tokenizer, history


def _as_used(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with the defaults a run resolves: stride = context_length, the BPE's vocabulary
    ``BPE_VOCAB_SIZE`` (so a resume may name the value the run used)."""
    used = dict(settings)
    if used["stride"] is None:
        used["stride"] = used["context_length"]
    if used["vocab_size"] is None and used["tokenizer"] == "bpe":
        used["vocab_size"] = BPE_VOCAB_SIZE
    return used


def _resume_settings(stored: LMSettings, given: dict[str, Any]) -> LMSettings:
    """The stored settings with the resumable ones given; every given setting is first checked as a
    fresh run checks it (its message), then the run's own ones are compared with the checkpoint."""
    stored_dict = dataclasses.asdict(stored)
    if "steps" in given:
        stored_dict["epochs"] = None
    if "epochs" in given:
        stored_dict["steps"] = None
    used = _as_used(dataclasses.asdict(LMSettings(**{**stored_dict, **given})))
    fixed = {k: used[k] if v is None and k in ("stride", "vocab_size") else v for k, v in given.items()}
    fixed = {k: v for k, v in fixed.items() if k not in RESUMABLE}
    check_resumed_settings(fixed, _as_used(stored_dict), lambda k: f"--{k.replace('_', '-')}")
    resumable = {k: v for k, v in given.items() if k in RESUMABLE}
    return LMSettings(**{**stored_dict, **resumable})


def _check_resumed(history: LMHistory, settings: LMSettings, steps_per_epoch: int, name: str) -> None:
    """The history fits these loaders (its counters are the ones its step count gives), and the run
    asks for at least the steps already taken."""
    check_continues(history, steps_per_epoch, None, None, repr(name), hint=False)
    try:
        history.check_counts(steps_per_epoch, settings.batch_size * settings.context_length)
    except CheckpointError as exc:
        raise CheckpointError(f"{name!r}: {exc}") from None
    steps, epochs = settings.steps, settings.epochs
    check_continues(history, steps_per_epoch, steps, epochs, repr(name), ("steps", "epochs"), "the checkpoint", False)


def _check_sampling(settings: LMSettings, tokenizer: Tokenizer) -> None:
    """The samples' settings against the vocabulary, before the model is built."""
    if settings.top_k is not None and settings.top_k > tokenizer.vocab_size:
        raise ConfigError(f"top_k (--top-k) {settings.top_k} exceeds the vocabulary of {tokenizer.vocab_size} tokens")
    try:
        tokenizer.encode(settings.prompt)
    except ConfigError as exc:
        raise ConfigError(f"prompt (--prompt) {settings.prompt!r}: {exc}") from None


@interrupt_before_the_first_step
def run_lm(
    given: dict[str, Any],
    *,
    save: str | os.PathLike[str] | None = None,
    save_every: int = 0,
    resume: str | os.PathLike[str] | None = None,
    plot: str | None = None,
    out: TextIO | None = STDOUT,
) -> tuple[GPTModel, Tokenizer, LMHistory]:
    """Train a GPT on text with the settings ``given`` (``LMSettings`` fields; the rest default);
    print the run, a progress line per evaluation and the samples to ``out``; returns
    (model, tokenizer, history). ``resume``: continue the run in that checkpoint (``given`` may
    change only ``RESUMABLE`` settings: train longer, report differently). Every argument, the
    save and plot targets, the text and the whole resumed checkpoint are checked before the first step.

    Raises:
        ConfigError: a bad or unknown setting, ``save_every`` without ``save``, a plot path matplotlib
            cannot write, a text too short for one batch, a prompt the tokenizer cannot encode, a
            ``top_k`` above the vocabulary, ``steps`` below a resumed run's step count, a resumed run
            whose text differs.
        CheckpointError: an unreadable checkpoint, one of another kind of run or with a bad entry
            (the message names it), a save or plot target that is a directory or in a missing folder.
        TrainingError: a non-finite loss or gradient (the last checkpoint written stays as it was).
    """
    save_every = check_nonnegative_int(save_every, "save_every (--save-every)")
    out = check_out(out)
    if save is None and save_every:
        raise ConfigError(f"save_every={save_every} needs a save path (--save FILE)")
    if save is not None:
        atomic.check_run_target(save, holds=False)  # what it holds: after check_distinct below
    if plot is not None:
        check_plot_target(plot, holds=False)  # what it holds: after check_distinct below
    given = _check_given(given)
    if resume is not None:
        saved, stored, tokenizer, resumed = _read_checkpoint(resume)
        settings = _resume_settings(stored, given)
    else:
        settings = LMSettings(**given)
    atomic.check_distinct(
        {"save (--save)": save, "plot (--plot)": plot},
        {"text (--text)": settings.text, "resume (--resume)": resume},
        may_equal=("resume (--resume)", "save (--save)"),  # resuming saves over its own checkpoint
    )
    atomic.check_outputs(save, plot)  # each holds nothing, or what such a run writes (never a user's file)
    plot_guard = None if plot is None else SaveGuard(plot, "plot")  # and still holds it when the plot is written
    try:
        text, text_sha256 = _load_text(settings)
    except ConfigError as exc:
        if resume is None or "text" in given:
            raise
        raise ConfigError(
            f"{exc} (the --text the checkpoint stored; a relative one is read from the current folder, "
            "so resume from the folder the run started in, or pass --text FILE)"
        ) from None
    history = None
    if resume is not None:
        if saved["run"]["text_sha256"] != text_sha256:
            read = "the default corpus" if settings.text is None else repr(os.path.abspath(settings.text))
            relative = settings.text is not None and "text" not in given and not os.path.isabs(settings.text)
            chars = saved["run"]["text_chars"]
            size = (f"({chars} characters, as many as this one: an edit that kept the length; the checkpoint keeps "
                    "the text's SHA-256, not the text)" if chars == len(text) else f"({chars} characters)")
            raise ConfigError(
                f"the text read from {read} ({len(text)} characters) differs from the one the checkpoint was trained "
                f"on {size}; pass the same --text FILE (or none, for the default "
                "corpus)" + (f"; the stored --text {settings.text!r} is relative and was read from the current "
                             "folder: resume from the folder the run started in" if relative else "")
            )  # fmt: skip
        history, stored_tokenizer = resumed, tokenizer
    tokenizer = train_tokenizer(settings.tokenizer, text, settings.vocab_size)
    if resume is not None and stored_tokenizer.to_dict() != tokenizer.to_dict():  # an edit remaps every id
        raise CheckpointError(
            f"{atomic.as_path(resume)!r}: its tokenizer differs from the {settings.tokenizer} tokenizer the text and "
            "settings build (it is rebuilt on resume); every token id would mean another piece of text"
        )
    train_loader, val_loader = _loaders(text, tokenizer, settings)
    if history is not None:
        _check_resumed(history, settings, len(train_loader), atomic.as_path(resume))
    _check_sampling(settings, tokenizer)
    cfg = _gpt_config(settings, tokenizer.vocab_size)
    model = GPTModel(cfg, rng=settings.seed, dtype=np.dtype(settings.dtype))
    optimizer = AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    if resume is not None:
        name = atomic.as_path(resume)
        check_stored_dtypes(saved, model, settings.dtype, name)
        try:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
        except NpattnError as exc:
            raise CheckpointError(
                f"{name!r}: its model or optimizer entry does not fit the stored settings: {exc}"
            ) from None
        check_optimizer_settings(optimizer, name)
        check_optimizer_steps(optimizer, resumed.global_step + 1, name)
        set_rng_state(model, saved["dropout_rng"], name)
    steps_per_epoch = len(train_loader)
    num_epochs = settings.epochs or (math.ceil(settings.steps / steps_per_epoch) if settings.steps is not None else 1)
    run = {"task": "lm", "settings": dataclasses.asdict(settings), "text_sha256": text_sha256, "text_chars": len(text)}

    def write(hist: LMHistory) -> None:
        assert save is not None
        state = digest.stamped({
            "run": run,
            "tokenizer": json.dumps(tokenizer.to_dict()),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "history": hist.state_dict(),
            "dropout_rng": rng_state(model),
        })
        progress.save_run(hist.global_step + 1, state, "GPTModel", model.cfg)

    def on_step(hist: LMHistory) -> None:
        progress.step = hist.global_step + 1
        if save is not None and save_every and (hist.global_step + 1) % save_every == 0:
            write(hist)

    start = 0 if history is None else history.global_step + 1
    progress = RunProgress(start, None if save is None else atomic.as_path(save))
    try:
        with progress.interrupts():
            if out is not None:  # a stream failing here is reported as one failing in the loop
                print_header(settings, text, tokenizer, train_loader, val_loader, model, resume, out)
            history = train_lm(
                model, train_loader, val_loader, optimizer, num_epochs, settings.eval_every, settings.eval_iter,
                settings.prompt, tokenizer, max_steps=settings.steps, history=history, out=out,
                sample_tokens=settings.sample_tokens, eval_before=True, on_step=on_step,
                temperature=settings.temperature, top_k=settings.top_k, rng=settings.seed,
            )  # fmt: skip
            if save is not None:
                write(history)
    except (TrainingError, CheckpointError) as exc:  # a failed step, or a save the OS refused mid-run
        if save is None:
            raise
        raise type(exc)(progress.after(exc)) from None
    except OSError as exc:  # writing to ``out`` failed (a reader that went away): the same type, with the outcome
        if save is None:
            raise
        said = f"writing the run's progress to out failed ({exc}). {progress.outcome()}"
        raise (type(exc)(exc.errno, said) if exc.errno is not None else type(exc)(said)) from None
    if plot is not None:
        plot_losses(history, plot, steps_per_epoch, plot_guard)
    return model, tokenizer, history
