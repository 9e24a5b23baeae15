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
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from npattn._checks import check_bool, check_finite, check_nonnegative_int, check_positive_int, check_probability
from npattn.errors import CheckpointError, ConfigError
from npattn.nn.gpt import GPTModel
from npattn.optim import AdamW
from npattn.train import checkpoint
from npattn.train.lm import LMHistory, train_lm
from npattn.train.text import DataLoader, create_dataloader_v1, default_corpus, read_text, split_train_val
from npattn.train.tokenizers import TOKENIZER_KINDS, Tokenizer, tokenizer_from_dict, train_tokenizer

__all__ = ["RESUMABLE", "LMSettings", "plot_losses", "run_lm"]

PLOT_HINT = "--plot needs matplotlib: pip install 'npattn[plot]' (or pip install matplotlib)"


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

        for field in ("context_length", "emb_dim", "n_heads", "n_layers", "batch_size", "eval_every", "eval_iter"):
            check_positive_int(getattr(self, field), name(field))
        for field in ("vocab_size", "stride", "epochs", "top_k"):
            if getattr(self, field) is not None:
                check_positive_int(getattr(self, field), name(field))
        for field in ("seed", "sample_tokens"):
            check_nonnegative_int(getattr(self, field), name(field))
        if self.steps is not None:
            check_nonnegative_int(self.steps, name("steps"))
        check_probability(self.drop_rate, name("drop_rate"))
        check_bool(self.qkv_bias, name("qkv_bias"))
        for field in ("lr", "weight_decay", "temperature"):
            if check_finite(getattr(self, field), name(field)) < 0:
                raise ConfigError(f"{name(field)} must be >= 0, got {getattr(self, field)}")
        if self.tokenizer not in TOKENIZER_KINDS:
            raise ConfigError(
                f"unknown tokenizer {self.tokenizer!r} (--tokenizer); choose one of {', '.join(TOKENIZER_KINDS)}"
            )
        if self.vocab_size is not None and self.tokenizer != "bpe":
            raise ConfigError(f"vocab_size (--vocab-size) applies to the bpe tokenizer only, not {self.tokenizer}")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"dtype (--dtype) must be float32 or float64, got {self.dtype!r}")
        if self.emb_dim % self.n_heads:
            raise ConfigError(
                f"emb_dim (--emb-dim) {self.emb_dim} must be divisible by n_heads (--n-heads) {self.n_heads}"
            )
        if self.steps is not None and self.epochs is not None:
            raise ConfigError("give --steps or --epochs, not both")
        if not isinstance(self.prompt, str) or not self.prompt:
            raise ConfigError("prompt (--prompt) must be a non-empty text")


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
        raise ConfigError(
            f"the training text ({len(train_loader.dataset.token_ids)} tokens) gives no batch of "
            f"{settings.batch_size} windows of context_length + 1 = {window} tokens; use a longer text, a shorter "
            "--context-length or a smaller --batch-size"
        )
    if len(val_loader) == 0:
        raise ConfigError(
            f"the validation text (the last 10%: {len(val_loader.dataset.token_ids)} tokens) is shorter than one "
            f"window of context_length + 1 = {window} tokens; use a longer text or a shorter --context-length"
        )
    return train_loader, val_loader


def _resume_settings(saved: Any, given: dict[str, Any], path: str) -> LMSettings:
    try:
        run = saved["run"]
        if run.get("task") != "lm":
            raise KeyError("task")
        stored = dict(run["settings"])
    except (KeyError, TypeError, AttributeError):
        raise CheckpointError(
            f"{path!r} is not a checkpoint of a language-model run (npattn train --task lm)"
        ) from None
    clash = {k: (v, stored.get(k)) for k, v in given.items() if k not in RESUMABLE and stored.get(k) != v}
    if clash:
        raise ConfigError(
            "--resume continues the stored run; these options differ from it: "
            + ", ".join(f"--{k.replace('_', '-')} {v!r} (checkpoint: {c!r})" for k, (v, c) in clash.items())
        )
    resumable = {k: v for k, v in given.items() if k in RESUMABLE}
    if "steps" in resumable:
        stored["epochs"] = None
    if "epochs" in resumable:
        stored["steps"] = None
    return LMSettings(**{**stored, **resumable})


def run_lm(
    given: dict[str, Any],
    *,
    save: str | os.PathLike[str] | None = None,
    save_every: int = 0,
    resume: str | os.PathLike[str] | None = None,
    plot: str | None = None,
    out: TextIO | None = sys.stdout,
) -> tuple[GPTModel, Tokenizer, LMHistory]:
    """Train a GPT on text with the settings ``given`` (``LMSettings`` fields; the rest default);
    print the run, a progress line per evaluation and the samples to ``out``; returns
    (model, tokenizer, history). ``resume``: continue the run in that checkpoint (``given`` may
    change only ``RESUMABLE`` settings: train longer, report differently).

    Raises:
        ConfigError: a bad setting, a text too short for one batch, a resumed run whose text differs.
        CheckpointError: an unreadable checkpoint or one of another kind of run.
        TrainingError: a non-finite loss or gradient (the last checkpoint written stays as it was).
    """
    if save is not None and not os.fspath(save).endswith(".npz"):
        raise ConfigError(f"--save: a training checkpoint is an .npz file, got {os.fspath(save)!r}")
    save_every = check_nonnegative_int(save_every, "save_every (--save-every)")
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError(PLOT_HINT) from None
    saved = checkpoint.load(resume) if resume is not None else None
    settings = _resume_settings(saved, given, os.fspath(resume)) if resume is not None else LMSettings(**given)
    text, text_sha256 = _load_text(settings)
    if saved is not None:
        if saved["run"].get("text_sha256") != text_sha256:
            raise ConfigError(
                f"the text differs from the one the checkpoint was trained on ({saved['run'].get('text_chars')} "
                f"characters); pass the same --text FILE (or none, for the default corpus)"
            )
        tokenizer = tokenizer_from_dict(json.loads(str(saved["tokenizer"])))
    else:
        tokenizer = train_tokenizer(settings.tokenizer, text, settings.vocab_size)
    train_loader, val_loader = _loaders(text, tokenizer, settings)
    cfg = _gpt_config(settings, tokenizer.vocab_size)
    model = GPTModel(cfg, rng=settings.seed, dtype=np.dtype(settings.dtype))
    optimizer = AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    history = None
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        history = LMHistory.from_state_dict(saved["history"])
        _set_rng_state(model, saved.get("dropout_rng"))
    steps_per_epoch = len(train_loader)
    num_epochs = settings.epochs or (math.ceil(settings.steps / steps_per_epoch) if settings.steps is not None else 1)
    run = {"task": "lm", "settings": dataclasses.asdict(settings), "text_sha256": text_sha256, "text_chars": len(text)}

    def write(hist: LMHistory) -> None:
        assert save is not None
        state = {
            "run": run,
            "tokenizer": json.dumps(tokenizer.to_dict()),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "history": hist.state_dict(),
            "dropout_rng": _rng_state(model),
        }
        checkpoint.save(state, save, metadata={"class": "GPTModel", "config": cfg})

    def on_step(hist: LMHistory) -> None:
        if save is not None and save_every and (hist.global_step + 1) % save_every == 0:
            write(hist)

    if out is not None:
        _print_header(settings, text, tokenizer, train_loader, val_loader, model, resume, out)
    history = train_lm(
        model,
        train_loader,
        val_loader,
        optimizer,
        num_epochs,
        settings.eval_every,
        settings.eval_iter,
        settings.prompt,
        tokenizer,
        max_steps=settings.steps,
        history=history,
        out=out,
        sample_tokens=settings.sample_tokens,
        eval_before=True,
        on_step=on_step,
        temperature=settings.temperature,
        top_k=settings.top_k,
        rng=settings.seed,
    )
    if save is not None:
        write(history)
    if plot is not None:
        plot_losses(history, plot, steps_per_epoch)
    return model, tokenizer, history


def _generators(model: Any) -> list[Any]:
    """The distinct random generators the model's dropout layers draw from, in module order."""
    found: dict[int, Any] = {}
    for module in model.modules():
        rng = getattr(module, "rng", None)
        if rng is not None:
            found.setdefault(id(rng), rng)
    return list(found.values())


def _rng_state(model: Any) -> list[Any]:
    """The state of every generator dropout draws from (plain values), so a resumed run draws the
    same dropout masks as an uninterrupted one."""
    return [
        {"numpy": json.dumps(rng.bit_generator.state)} if isinstance(rng, np.random.Generator) else rng.get_state()
        for rng in _generators(model)
    ]


def _set_rng_state(model: Any, states: Any) -> None:
    generators = _generators(model)
    if not isinstance(states, list) or len(states) != len(generators):
        raise CheckpointError("the checkpoint's dropout random state does not fit this model")
    for rng, state in zip(generators, states):
        if isinstance(rng, np.random.Generator):
            rng.bit_generator.state = json.loads(str(state["numpy"]))
        else:
            rng.set_state(state)


def _print_header(
    settings: LMSettings,
    text: str,
    tokenizer: Tokenizer,
    train_loader: DataLoader,
    val_loader: DataLoader,
    model: Any,
    resume: Any,
    out: TextIO,
) -> None:
    source = settings.text if settings.text is not None else "the standard library's pydoc_data.topics"
    n_params = sum(p.size for p in model.parameters())
    length = f"{settings.steps} steps" if settings.steps is not None else f"{settings.epochs or 1} epoch(s)"
    print(f"text: {source}, {len(text):,} characters", file=out)
    print(
        f"tokenizer: {settings.tokenizer}, vocabulary {tokenizer.vocab_size}; "
        f"{len(train_loader.dataset.token_ids):,} training and {len(val_loader.dataset.token_ids):,} validation tokens",
        file=out,
    )
    print(
        f"model: GPTModel(vocab {tokenizer.vocab_size}, context {settings.context_length}, emb {settings.emb_dim}, "
        f"{settings.n_heads} heads, {settings.n_layers} layers, dropout {settings.drop_rate}), "
        f"{n_params:,} parameters, {settings.dtype}, seed {settings.seed}",
        file=out,
    )
    print(
        f"training: AdamW(lr={settings.lr}, weight_decay={settings.weight_decay}), batches of {settings.batch_size}, "
        f"{len(train_loader)} steps per epoch, {length}"
        + (f" (resuming {os.fspath(resume)})" if resume is not None else ""),
        file=out,
    )


def plot_losses(history: LMHistory, path: str, steps_per_epoch: int) -> None:
    """The book's plot: training and validation loss against the tokens seen (epochs on top)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history.track_tokens_seen, history.train_losses, label="training loss")
    ax.plot(history.track_tokens_seen, history.val_losses, linestyle="-.", label="validation loss")
    ax.set(xlabel="tokens seen", ylabel="loss (cross-entropy)")
    ax.legend(loc="upper right")
    top = ax.twiny()
    epochs = [(step + 1) / steps_per_epoch for step in history.eval_steps]
    top.plot(epochs, history.train_losses, alpha=0)  # invisible: aligns the epoch axis
    top.set_xlabel("epochs")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
