"""The book's chapter-5 training loop for a GPT, with the backward done by hand.

The loop reads like the book's ``train_model_simple``::

    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model)   # forward + mean cross-entropy
            loss.backward()                                            # dL/dlogits, then model.backward
            optimizer.step()
            tokens_seen += input_batch.size
            global_step += 1
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(model, train_loader, val_loader, eval_iter)
        generate_and_print_sample(model, tokenizer, start_context)

``train_lm`` runs it and returns an ``LMHistory`` (the book's three lists, the steps they were
taken at and the samples). Beyond the book it can stop after ``max_steps`` updates (with a last
evaluation and sample), resume from a history (the batches of epoch e depend only on the
loader's seed and e), and stops with ``TrainingError`` before a non-finite step touches the weights.
``LMHistory``, its checks and the progress line moved to ``npattn.train.lm_history`` (importable from here).
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TextIO

import numpy as np

from npattn._checks import check_bool, check_nonnegative_int, check_positive_int, finite_float
from npattn._interrupts import raise_if_pressed
from npattn.errors import BackwardError, ConfigError, TrainingError
from npattn.nn.functional import token_cross_entropy_backward, token_cross_entropy_forward
from npattn.nn.functional.transformer import refuse_bool_ids
from npattn.nn.module import Module
from npattn.optim import Optimizer
from npattn.train.book_device import book_device
from npattn.train.generate import check_vocab_settings, generate
from npattn.train.lm_continue import (
    check_continues,
    check_same_order,
    check_step_count,
    check_tokens_fit,
    windows_digest,
)
from npattn.train.lm_history import LMHistory, check_records, progress_line
from npattn.train.lm_history import differences as differences
from npattn.train.loop import check_callback, check_finite, check_optimizer_of, check_updated, check_weights_finite
from npattn.train.text import DataLoader, GPTDatasetV1, check_tokenizer, largest_stride
from npattn.train.tokenizers import Tokenizer, text_to_token_ids, token_ids_to_text

__all__ = [
    "BatchLoss",
    "LMHistory",
    "calc_loss_batch",
    "calc_loss_loader",
    "evaluate_model",
    "generate_and_print_sample",
    "train_lm",
]


def _number(value: Any) -> float | None:
    """A finite real number (a 0-d array or tensor too), else None."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return finite_float(value)


def _refusal(form: str) -> Callable[..., NoReturn]:
    """A BatchLoss operator that refuses, naming the operation: ``form`` with the other operand."""

    def refuse(self: Any, other: Any = None) -> NoReturn:
        raise ConfigError(
            f"{form.format(f'{other!r:.40}')}: a BatchLoss can only be multiplied or divided by a finite number "
            "(loss / accum_steps) or negated, which scales its gradients alike; for anything else call backward() "
            "on each loss (the gradients accumulate in .grad), or compute with float(loss) to report it"
        )

    return refuse


class BatchLoss:
    """The mean cross-entropy of one batch, as a number (``float(loss)``, ``loss.item()``) that
    can also run its own backward: ``loss.backward()`` computes dL/dlogits and hands it to
    ``model.backward``, which accumulates every parameter's ``.grad`` (like PyTorch's). It can be
    scaled by a number, as in gradient accumulation (``(loss / accum_steps).backward()``): the
    gradients are scaled alike."""

    def __init__(self, value: float, model: Any, cache: tuple, scale: float = 1.0) -> None:
        self.value = value
        self.scale = scale  # d(this loss) / d(the batch's mean cross-entropy)
        self._model = model
        self._cache = cache
        self._forward = getattr(model, "_forward_count", None)
        self._forward_cache = getattr(model, "_cache", None)  # new with every forward, model.forward(x) too

    def item(self) -> float:
        return self.value

    def __float__(self) -> float:
        return self.value

    def _scaled(self, factor: Any, op: str) -> BatchLoss:
        number = _number(factor)
        if number is None:
            raise ConfigError(f"loss {op} {factor!r:.40}: a BatchLoss is scaled by a finite real number only")
        if not (np.isfinite(self.value * number) and np.isfinite(self.scale * number)):
            raise ConfigError(
                f"loss {op} {factor!r:.40}: a BatchLoss is scaled to finite values only (the loss or scale overflows)"
            )
        scaled = BatchLoss(self.value * number, self._model, self._cache, self.scale * number)
        scaled._forward, scaled._forward_cache = self._forward, self._forward_cache
        return scaled

    def __mul__(self, factor: Any) -> BatchLoss:
        return self._scaled(factor, "*")

    __rmul__ = __mul__

    def __truediv__(self, divisor: Any) -> BatchLoss:
        number = _number(divisor)
        if number is None or number == 0:
            raise ConfigError(f"loss / {divisor!r:.40}: a BatchLoss is divided by a finite nonzero real number only")
        return self._scaled(1.0 / number, "/")

    def __neg__(self) -> BatchLoss:
        return self._scaled(-1.0, "*")

    # everything else a number allows is refused, naming the operation ({} is the other operand)
    __add__ = _refusal("loss + {}")
    __radd__ = _refusal("{} + loss")
    __sub__ = _refusal("loss - {}")
    __rsub__ = _refusal("{} - loss")
    __pow__ = _refusal("loss ** {}")
    __rpow__ = _refusal("{} ** loss")
    __rtruediv__ = _refusal("{} / loss (the loss as a divisor)")
    __abs__ = _refusal("abs(loss)")

    def backward(self) -> None:
        """Raises BackwardError if the model ran another forward after this loss was computed, or
        this batch's backward already ran."""
        now = getattr(self._model, "_forward_count", None)
        if now != self._forward or getattr(self._model, "_cache", None) is not self._forward_cache:
            raise BackwardError(
                f"loss.backward(): the model ran another forward after this loss was computed (model() "
                f"calls {now}, expected {self._forward}; or a direct model.forward()): compute the loss again"
            )
        try:
            (dlogits,) = token_cross_entropy_backward(np.asarray(self.scale), self._cache)
        except BackwardError:
            raise BackwardError(
                "loss.backward(): this batch's backward already ran (once per loss, as in PyTorch without "
                "retain_graph); compute the loss again (calc_loss_batch) for another backward"
            ) from None
        self._model.backward(dlogits)

    def __repr__(self) -> str:
        return f"BatchLoss({self.value:.6g})"


@book_device(3)
def calc_loss_batch(input_batch: Any, target_batch: Any, model: Any) -> BatchLoss:
    """The book's loss: ``cross_entropy(logits.flatten(0, 1), target_batch.flatten())``, the mean
    over all (batch, n) tokens of -log softmax(logits)[target]. input and target (batch, n) ints."""
    targets = np.asarray(target_batch)
    refuse_bool_ids(target_batch, targets, "target_batch")
    logits = model(input_batch)
    loss, cache = token_cross_entropy_forward(logits, targets)
    return BatchLoss(float(loss), model, cache)


@book_device(2)
def calc_loss_loader(data_loader: Iterable[Any], model: Any, num_batches: int | None = None) -> float:
    """The mean batch loss over the first ``num_batches`` batches (all of them if None); NaN for an
    empty loader, as in the book."""
    size = len(data_loader)  # type: ignore[arg-type]
    if size == 0:
        return float("nan")
    num_batches = size if num_batches is None else min(check_positive_int(num_batches, "num_batches"), size)
    total_loss = 0.0
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i >= num_batches:
            break
        total_loss += calc_loss_batch(input_batch, target_batch, model).item()
    return total_loss / num_batches


@book_device(3)
def evaluate_model(model: Any, train_loader: Any, val_loader: Any, eval_iter: int) -> tuple[float, float]:
    """Train and validation loss over ``eval_iter`` batches each, in eval mode (no dropout)."""
    model.eval()
    train_loss = calc_loss_loader(train_loader, model, num_batches=eval_iter)
    val_loss = calc_loss_loader(val_loader, model, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


class _Stdout:
    """The default of ``out=``: ``sys.stdout`` as it is when the call runs (so a
    ``contextlib.redirect_stdout`` in effect then is honoured), not the one bound at import."""

    def __repr__(self) -> str:
        return "sys.stdout"


STDOUT: Any = _Stdout()
"""``out=STDOUT`` prints to the ``sys.stdout`` of the moment of the call; ``out=None`` prints nothing."""


@book_device(2, before="start_context")
def generate_and_print_sample(
    model: Any,
    tokenizer: Tokenizer,
    start_context: str,
    *,
    max_new_tokens: int = 50,
    out: TextIO | None = STDOUT,
    **sampling: Any,
) -> str:
    """The book's sample: ``start_context`` continued by ``max_new_tokens`` greedy tokens (or with
    ``temperature``/``top_k``/``rng`` passed on to ``generate``), printed on one line (newlines,
    tabs and other unprintable characters shown as spaces) to ``out`` (the ``sys.stdout`` of the
    call by default; None prints nothing); returns the text as generated."""
    out = sys.stdout if out is STDOUT else out
    model.eval()
    context_size = model.pos_emb.weight.shape[0]
    encoded = text_to_token_ids(start_context, tokenizer)
    token_ids = generate(model, encoded, max_new_tokens, context_size, **sampling)
    decoded_text = token_ids_to_text(token_ids, tokenizer)
    if out is not None:  # the book prints newlines as spaces; so are tabs and control bytes here
        print("".join(c if c.isprintable() else " " for c in decoded_text), file=out)
    model.train()
    return decoded_text


def check_out(out: Any) -> TextIO | None:
    """``out`` (where a run prints) is a text stream or None (not a binary one, which print cannot
    write to); returns it, ``STDOUT`` as the ``sys.stdout`` of this moment. Raises ConfigError
    naming its type."""
    out = sys.stdout if out is STDOUT else out
    binary = isinstance(out, (io.RawIOBase, io.BufferedIOBase))
    if out is not None and (binary or isinstance(out, type) or not callable(getattr(out, "write", None))):
        raise ConfigError(f"out must be a text stream (with write) or None, got {type(out).__name__}")
    return out


def _check_gives_batches(loader: Any, what: str, name: str) -> None:
    """A loader must have a length and iterate (what ``calc_loss_loader`` reads: an npattn or torch
    DataLoader, a list of (input, target) batches); a loader of length 0 is refused."""
    try:  # no iter(loader) here: a torch DataLoader's iterator draws its seed from torch's stream
        empty = len(loader) == 0
        iterable = isinstance(loader, Iterable)
        if not iterable:
            raise TypeError
    except TypeError:
        raise ConfigError(
            f"train_lm: {name} must be a loader of (input, target) batches with a length (an npattn or torch "
            f"DataLoader, or a list of batches), got {type(loader).__name__}"
        ) from None
    if empty:
        dataset: Any = getattr(loader, "dataset", None)
        fix = "a longer text, a shorter context or a smaller batch"
        if not (hasattr(dataset, "max_length") and hasattr(dataset, "__len__")):
            raise ConfigError(f"{what} gives no batch (a loader of length 0); use {fix}")
        held: Any = loader  # a loader of length 0 with a dataset: npattn's or torch's DataLoader
        windows = f"{len(dataset)} windows of {dataset.max_length} tokens for batches of {held.batch_size}"
        if isinstance(dataset, GPTDatasetV1):  # the stride may be the cause: name it, and the one that gives a batch
            windows += f" (a window starts every stride = {dataset.stride} tokens of its {len(dataset.token_ids)})"
            stride = largest_stride(dataset, held.batch_size if getattr(loader, "drop_last", True) else 1)
            fix = fix if stride is None else f"a stride of at most {stride}, or {fix}"
        raise ConfigError(f"{what} gives no batch: {windows}; use {fix}")


SAMPLING = ("temperature", "top_k", "eos_id", "rng")
"""The keywords ``train_lm`` passes on to ``generate`` for its samples."""


def _check_sampling(model: Any, tokenizer: Tokenizer, start_context: Any, sample_tokens: Any, sampling: Any) -> None:
    """The sample's settings checked before the first step (a refusal after training would have
    changed the weights in a call that raised): known keywords, and ``generate``'s own checks on
    them with no token generated."""
    unknown = sorted(set(sampling) - set(SAMPLING))
    if unknown:
        raise ConfigError(f"train_lm: unknown sampling keyword(s) {unknown}; it passes on {list(SAMPLING)}")
    if not isinstance(start_context, str):
        raise ConfigError(f"train_lm: start_context must be a str, got {type(start_context).__name__}")
    sample_tokens = check_nonnegative_int(sample_tokens, "sample_tokens")
    encoded = text_to_token_ids(start_context, tokenizer)
    if sample_tokens and encoded.shape[-1] == 0:
        raise ConfigError(
            f"train_lm: start_context {start_context!r} gives no token to continue; give at least one character "
            "of the text (or sample_tokens=0)"
        )
    if hasattr(model, "pos_emb"):  # generate's checks of temperature, top_k, eos_id and rng, without the model
        generate(model, encoded, 0, model.pos_emb.weight.shape[0], **sampling)
    else:
        generate(lambda ids: ids, encoded, 0, 1, **sampling)
    # the vocabulary the samples draw from: the model's output head, else the tokenizer's
    head = getattr(getattr(model, "out_head", None), "weight", None)
    vocab = head.shape[0] if head is not None else getattr(tokenizer, "vocab_size", None)
    if isinstance(vocab, int):
        try:
            check_vocab_settings(sampling.get("top_k"), sampling.get("eos_id"), vocab)
        except ConfigError as exc:
            raise ConfigError(f"train_lm: {exc}") from None


def model_vocab(model: Any) -> tuple[int | None, int | None]:
    """The rows of the model's token embedding (the input ids it reads) and of its output head (the
    targets it scores), None where the model has none (a model of one's own)."""
    rows = []
    for layer in ("tok_emb", "out_head"):
        weight = getattr(getattr(model, layer, None), "weight", None)
        shape = getattr(weight, "shape", None)
        rows.append(int(shape[0]) if shape else None)
    return rows[0], rows[1]


def _check_vocab_fits(model: Any, tokenizer: Tokenizer) -> None:
    """The tokenizer's ids fit the model's vocabulary (checked before the first step: a larger
    tokenizer would fail mid-run, after many updates changed the weights)."""
    vocab = getattr(tokenizer, "vocab_size", None)
    for rows, layer in zip(model_vocab(model), ("tok_emb", "out_head")):
        if isinstance(vocab, int) and rows is not None and vocab > rows:
            raise ConfigError(
                f"train_lm: the tokenizer has vocab_size {vocab}, but the model's {layer} has {rows} rows (its "
                f"vocab_size); token ids up to {vocab - 1} would not fit: build the model with vocab_size >= {vocab}"
            )


def _check_batch_ids(model: Any, input_batch: Any, target_batch: Any, step: int) -> None:
    """The batch's ids lie in the model's vocabulary, checked before its forward (a loader over other
    ids). Raises ConfigError naming the step, the id and the vocabulary; the weights are untouched."""
    for ids, rows, name in zip((input_batch, target_batch), model_vocab(model), ("input", "target")):
        values = np.asarray(ids)
        if rows is None or values.size == 0 or values.dtype.kind not in "iu":
            continue  # other dtypes are refused by the forward, before any update
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= rows:
            bad = low if low < 0 else high
            raise ConfigError(
                f"train_lm: step {step}'s {name} batch holds token id {bad}, outside the model's vocabulary "
                f"[0, {rows}); the weights were not changed by step {step} "
                + ("(they hold their values before the first step)" if step == 0 else
                   f"(they hold the values after step {step - 1})")
                + ": the loader must give ids of the tokenizer the model was built for"
            )


@book_device(4)
def train_lm(
    model: Any,
    train_loader: DataLoader | Any,
    val_loader: Any,
    optimizer: Optimizer,
    num_epochs: int,
    eval_freq: int,
    eval_iter: int,
    start_context: str,
    tokenizer: Tokenizer,
    *,
    max_steps: int | None = None,
    history: LMHistory | None = None,
    out: TextIO | None = STDOUT,
    sample_tokens: int = 50,
    eval_before: bool = False,
    on_step: Callable[[LMHistory], None] | None = None,
    **sampling: Any,
) -> LMHistory:
    """The book's ``train_model_simple``: ``num_epochs`` passes over ``train_loader`` (stopping
    early after ``max_steps`` updates in total), train and validation loss over ``eval_iter``
    batches every ``eval_freq`` updates (printed with the tokens seen), a sample of
    ``sample_tokens`` tokens from ``start_context`` after each epoch (``sampling``: temperature,
    top_k, rng for ``generate``; greedy by default, as in the book). ``history``: continue the run
    it describes. ``on_step(history)`` runs after every update (checkpoints are written there).
    A run cut short by ``max_steps`` ends with an evaluation and a sample too. ``eval_before``:
    also evaluate and sample before the first update (recorded at global_step -1, 0 tokens seen).

    Raises:
        ConfigError: an argument out of range, an optimizer that updates parameters of another
            model, or an empty training or validation loader (the text is shorter
            than one context window plus one token, or than one batch with drop_last), a tokenizer
            of more ids than the model's vocabulary, a weight NaN or inf (before the first step);
            a batch with an id outside the model's vocabulary (before that step's forward).
        TrainingError: the loss or a gradient became NaN or inf (the weights were not updated).
    """
    out = check_out(out)
    tokenizer = check_tokenizer(tokenizer)
    if isinstance(model, Module):
        check_optimizer_of(model, optimizer, "train_lm")
    check_callback(on_step, "on_step", "history")
    eval_before = check_bool(eval_before, "eval_before")
    _check_sampling(model, tokenizer, start_context, sample_tokens, sampling)
    _check_vocab_fits(model, tokenizer)
    if isinstance(model, Module):
        check_weights_finite(model, "train_lm")
    num_epochs = check_nonnegative_int(num_epochs, "num_epochs")
    eval_freq = check_positive_int(eval_freq, "eval_freq")
    eval_iter = check_positive_int(eval_iter, "eval_iter")
    sample_tokens = check_nonnegative_int(sample_tokens, "sample_tokens")
    if max_steps is not None:
        max_steps = check_nonnegative_int(max_steps, "max_steps")
    _check_gives_batches(train_loader, "the training data", "train_loader")
    _check_gives_batches(val_loader, "the validation data (val_loader)", "val_loader")  # its losses would all be nan
    history = history if history is not None else LMHistory()
    check_continues(history, len(train_loader), max_steps, num_epochs, "train_lm")
    check_tokens_fit(history, train_loader, "train_lm")
    if history.batch and not hasattr(train_loader, "batches"):
        raise ConfigError(
            f"train_lm: the history stands at batch {history.batch} inside epoch {history.epoch}; resuming inside "
            f"an epoch needs npattn's DataLoader (its batches of an epoch are always the same), got "
            f"train_loader of type {type(train_loader).__name__}"
        )
    check_step_count(history, len(train_loader), "train_lm")
    check_same_order(history, train_loader, "train_lm")
    check_records(history, ConfigError, "train_lm: ")  # what any loader gives, after the counters' checks
    npattn_loader = isinstance(train_loader, DataLoader)  # the order its epochs give: recorded for a continuation
    history.loader_shuffle = train_loader.shuffle if npattn_loader else None
    history.loader_seed = train_loader.seed if npattn_loader else None
    history.loader_windows = windows_digest(train_loader) if npattn_loader else None

    def evaluate(epoch: int) -> None:
        train_loss, val_loss = evaluate_model(model, train_loader, val_loader, eval_iter)
        history.train_losses.append(train_loss)
        history.val_losses.append(val_loss)
        history.track_tokens_seen.append(history.tokens_seen)
        history.eval_steps.append(history.global_step)
        if out is not None:
            print(progress_line(epoch, history), file=out)

    def sample() -> None:
        text = generate_and_print_sample(
            model, tokenizer, start_context, max_new_tokens=sample_tokens, out=out, **sampling
        )
        history.samples.append((history.global_step, text))

    def done() -> bool:
        return max_steps is not None and history.global_step + 1 >= max_steps

    if eval_before and history.global_step == -1 and not history.eval_steps:
        evaluate(0)
        sample()
    model.train()
    optimizer.zero_grad()
    while history.epoch < num_epochs and not done():
        epoch = history.epoch
        # npattn's loader gives the batches of any epoch; another (a list, a torch DataLoader) is iterated
        # afresh each epoch, as in the book
        batches = train_loader.batches(epoch) if hasattr(train_loader, "batches") else iter(train_loader)
        for _ in range(history.batch):  # resuming inside an epoch: skip the batches already used
            next(batches)
        for input_batch, target_batch in batches:
            raise_if_pressed()  # a Ctrl-C the command line's handler could not deliver (npattn._interrupts)
            started = time.perf_counter()
            optimizer.zero_grad()
            _check_batch_ids(model, input_batch, target_batch, history.global_step + 1)
            loss = calc_loss_batch(input_batch, target_batch, model)
            loss.backward()
            check_finite(model, loss.item(), history.global_step + 1)
            optimizer.step()
            check_updated(model, history.global_step + 1)
            history.tokens_seen += int(np.asarray(input_batch).size)
            history.global_step += 1
            history.batch += 1
            history.seconds += time.perf_counter() - started
            if history.global_step % eval_freq == 0:
                evaluate(epoch)
            if done():
                break
            if on_step:
                on_step(history)
        if history.batch == len(train_loader):
            history.epoch, history.batch = epoch + 1, 0
        elif not done():  # a loader of one's own that gives fewer batches than its len() says
            raise TrainingError(
                f"train_lm: train_loader gave {history.batch} batches in epoch {epoch}, not the {len(train_loader)} "
                f"its len() gives; the model, the optimizer and history were updated through step "
                f"{history.global_step} (history.batch {history.batch}, which a continuation would look for)"
            )
        if done() and history.eval_steps[-1:] != [history.global_step]:
            evaluate(epoch)
        sample()
        if on_step:
            on_step(history)
    optimizer.zero_grad()
    return history
