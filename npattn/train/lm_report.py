"""What a language-model run shows: its header (text, tokenizer, model, training) and the book's
loss plot."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TextIO

from npattn.train.figures import save_figure
from npattn.train.lm import LMHistory
from npattn.train.saveguard import SaveGuard
from npattn.train.text import DataLoader
from npattn.train.tokenizers import Tokenizer

if TYPE_CHECKING:  # lm_run imports this module
    from npattn.train.lm_run import LMSettings

__all__ = ["plot_losses", "print_header"]


def print_header(
    settings: LMSettings,
    text: str,
    tokenizer: Tokenizer,
    train_loader: DataLoader,
    val_loader: DataLoader,
    model: Any,
    resume: Any,
    out: TextIO,
) -> None:
    """The run's first lines: the text, the tokenizer, the model and the training settings."""
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


def plot_losses(history: LMHistory, path: str, steps_per_epoch: int, guard: SaveGuard | None = None) -> None:
    """The book's plot: training and validation loss against the tokens seen (epochs on top);
    ``guard``: what ``path`` held when the run started (``save_figure``)."""
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
    save_figure(fig, path, guard, dpi=100)
    plt.close(fig)
