"""Sampling from a GPT: the book's chapter-5 ``generate`` with temperature and top-k.

Each step feeds the last ``context_size`` tokens, keeps the logits of the last position, and
picks the next token: with ``top_k`` every logit below the k-th largest becomes -inf; with
``temperature > 0`` the token is drawn from softmax(logits / temperature), otherwise it is the
argmax (greedy, what ``generate_text_simple`` does). ``eos_id`` stops early.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from npattn._checks import check_finite, check_int64_ids, check_nonnegative_int, check_positive_int
from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.nn.functional import softmax
from npattn.nn.functional.transformer import refuse_bool_ids
from npattn.nn.gpt import check_context_size, check_next_logits, check_prompt
from npattn.random import RNGLike, TorchGenerator, resolve_rng

__all__ = ["as_token_ids", "check_vocab_settings", "generate", "sample_next"]


def as_token_ids(idx: Any, name: str = "idx") -> np.ndarray:
    """A (batch, n) batch of token ids as int64.

    Raises:
        ShapeError: not two axes. DTypeError: not integers.
    """
    arr = np.asarray(idx)
    refuse_bool_ids(idx, arr, name)
    if arr.dtype.kind not in "iu":
        if arr.size == 0 and arr.dtype.kind == "f":  # [[]]: an empty prompt
            arr = arr.astype(np.int64)
        else:
            raise DTypeError(f"{name}: expected integer token ids, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ShapeError(
            f"{name}: expected token ids of shape (batch, n_tokens), got shape {arr.shape}; "
            "a single prompt is [ids] (text_to_token_ids gives that shape)"
        )
    check_int64_ids(arr, name)
    return arr.astype(np.int64)



def check_vocab_settings(top_k: int | None, eos_id: int | None, vocab: int) -> None:
    """``top_k`` in [1, vocab] and ``eos_id`` in [0, vocab) (both already checked as integers).

    Raises:
        ConfigError: naming the setting, its value and the vocabulary.
    """
    if top_k is not None and top_k > vocab:
        raise ConfigError(f"top_k must lie in [1, vocab={vocab}], got {top_k}")
    if eos_id is not None and eos_id >= vocab:
        raise ConfigError(f"eos_id must lie in [0, vocab={vocab}) or it can never be picked, got {eos_id}")


def sample_next(
    logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator | TorchGenerator
) -> np.ndarray:
    """The next token of every row of ``logits`` (batch, vocab) -> (batch,) int64.

    Raises:
        ConfigError: a row holding NaN or +inf, or only -inf (no distribution to sample from and
            no largest logit; torch.multinomial refuses such probabilities too).
    """
    logits = check_next_logits(logits)
    if top_k is not None:
        # the book: top_logits, _ = torch.topk(logits, top_k); min_val = top_logits[:, -1]
        min_val = -np.partition(-logits, top_k - 1, axis=-1)[:, top_k - 1 : top_k]
        logits = np.where(logits < min_val, -np.inf, logits)
    with np.errstate(over="ignore"):
        scaled = logits / temperature if temperature != 0.0 else logits
    if temperature == 0.0 or not np.all(np.isfinite(scaled) | np.isneginf(logits)):
        # greedy, or a temperature so small (1e-310) that logits / temperature overflows: its limit, greedy
        return np.argmax(logits, axis=-1).astype(np.int64)
    probs = softmax(scaled, axis=-1)
    # torch.multinomial(probs, 1) by inversion: the first index whose running sum passes u;
    # searchsorted(side="right") never lands on a token of probability 0
    cumulative = np.cumsum(probs, axis=-1)
    if isinstance(rng, TorchGenerator):
        u = rng.rand(len(probs), dtype=np.float64)
    else:
        u = rng.random(len(probs))
    picks = np.empty(len(probs), dtype=np.int64)
    for row in range(len(probs)):
        last = int(np.flatnonzero(probs[row])[-1])
        picks[row] = min(int(np.searchsorted(cumulative[row], u[row] * cumulative[row, -1], side="right")), last)
    return picks


def generate(
    model: Any,
    idx: Any,
    max_new_tokens: int,
    context_size: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    eos_id: int | None = None,
    *,
    rng: RNGLike = None,
) -> np.ndarray:
    """The book's ``generate``: ``idx`` (batch, n) int token ids -> (batch, n + new) with at most
    ``max_new_tokens`` new tokens. ``model(ids)`` must return logits (batch, n, vocab); it runs in
    whatever mode it is in (call ``model.eval()`` first, as the book does). ``temperature=0.0``
    is greedy; sampling draws from ``rng`` (an int seed means a TorchGenerator, like the modules; checked
    even when greedy).
    ``eos_id``: stop before appending it once every row picks it (the book's single prompt: as
    soon as it is picked).

    Raises:
        ShapeError / DTypeError: ``idx`` is not a (batch, n) array of integers, or logits of the
            wrong shape. ConfigError: a negative ``max_new_tokens``, ``context_size`` below 1,
            a negative or non-finite ``temperature``, ``top_k`` outside [1, vocab], ``eos_id``
            outside [0, vocab), an empty prompt with ``max_new_tokens`` > 0, a ``context_size``
            above a GPTModel's context_length, logits holding NaN or inf (see ``sample_next``).
    """
    idx = as_token_ids(idx)
    max_new_tokens = check_nonnegative_int(max_new_tokens, "max_new_tokens")
    context_size = check_positive_int(context_size, "context_size")
    temperature = check_finite(temperature, "temperature")
    if temperature < 0:
        raise ConfigError(f"temperature must be >= 0 (0 is greedy), got {temperature}")
    if top_k is not None:
        top_k = check_positive_int(top_k, "top_k")
    if eos_id is not None and (isinstance(eos_id, bool) or not isinstance(eos_id, numbers.Integral) or eos_id < 0):
        raise ConfigError(f"eos_id must be None or a token id (an integer >= 0), got {eos_id!r}")
    check_prompt(idx, max_new_tokens)
    check_context_size(model, context_size)
    generator = resolve_rng(rng)  # checked even when greedy decoding never draws from it
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -context_size:]
        logits = np.asarray(model(idx_cond))
        if logits.ndim != 3 or logits.shape[:2] != idx_cond.shape:
            raise ShapeError(
                f"model(idx) must return logits of shape (batch, n_tokens, vocab) = {(*idx_cond.shape, 'vocab')}, "
                f"got {logits.shape}"
            )
        check_vocab_settings(top_k, eos_id, logits.shape[-1])
        idx_next = sample_next(logits[:, -1, :], temperature, top_k, generator)
        if eos_id is not None and np.all(idx_next == eos_id):
            break
        idx = np.concatenate([idx, idx_next[:, None]], axis=1)
    return idx
