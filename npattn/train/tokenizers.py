"""Tokenizers for training on text offline: characters, a byte-level BPE trained on the corpus, and
GPT-2's encoding through tiktoken when its files are already on this machine.

Every tokenizer has ``encode(text) -> list[int]``, ``decode(ids) -> str``, ``vocab_size``, ``kind``
and ``to_dict()`` (plain JSON: it is stored inside checkpoints, so a trained model always comes
back with the tokenizer it was trained with). ``npattn.train.tokenizer_files`` rebuilds one from
that dict (``tokenizer_from_dict``) and writes and reads it as a ``.json`` file.

- ``CharTokenizer.train(text)``: one token per distinct character of the corpus (sorted by code
  point). Exact round trip for any text made of those characters; any other character raises
  ``ConfigError`` naming it (the byte-level BPE encodes every text).
- ``BPETokenizer.train(text, vocab_size)``: GPT-2's byte-level scheme on a small scale; it moved,
  with its split pattern and merge learning, to ``npattn.train.bpe`` (still importable from here).
- ``gpt2_tokenizer()``: tiktoken's ``gpt2`` encoding (the book's), only if tiktoken is installed
  and its two files are in tiktoken's cache; nothing is downloaded.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from npattn.errors import ConfigError
from npattn.train.bpe import GPT2_SPLIT as GPT2_SPLIT
from npattn.train.bpe import PATTERN_PROBE as PATTERN_PROBE
from npattn.train.bpe import BPETokenizer
from npattn.train.tokenizer_checks import check_ids, check_text

__all__ = [
    "BPE_VOCAB_SIZE",
    "TOKENIZERS_SHOWN",
    "TOKENIZER_KINDS",
    "BPETokenizer",
    "CharTokenizer",
    "GPT2Tokenizer",
    "Tokenizer",
    "gpt2_tokenizer",
    "text_to_token_ids",
    "token_ids_to_text",
    "train_tokenizer",
]

TOKENIZER_KINDS = ("char", "bpe", "gpt2")
TOKENIZERS_SHOWN = "npattn.train.CharTokenizer, BPETokenizer, gpt2_tokenizer() or train_tokenizer(kind, text)"
"""Where the tokenizers live, as an error message names them (they are not top-level npattn names)."""


class Tokenizer(Protocol):
    """What the training code needs from a tokenizer."""

    kind: str

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


# ----------------------------------------------------------------------------------------------
# Characters


class CharTokenizer:
    """One token per character: ``chars[i]`` is token ``i``.

    Raises:
        ConfigError: (from ``encode``) a character not in the vocabulary; duplicate or
            multi-character entries in ``chars``.
    """

    kind = "char"

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = list(chars)
        if not self.chars or any(not isinstance(c, str) or len(c) != 1 for c in self.chars):
            raise ConfigError("CharTokenizer needs a non-empty list of single characters")
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        if len(self.stoi) != len(self.chars):
            raise ConfigError("CharTokenizer: the character list has duplicates")

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        """The distinct characters of ``text``, sorted by code point (deterministic)."""
        text = check_text(text)
        if not text:
            raise ConfigError("cannot build a character vocabulary from an empty text")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        text = check_text(text)
        try:
            return [self.stoi[c] for c in text]
        except KeyError as exc:
            c = exc.args[0]
            raise ConfigError(
                f"character {c!r} (U+{ord(c):04X}) is not in this character tokenizer's vocabulary of "
                f"{self.vocab_size} characters (those of its training text); the byte-level BPE encodes any text"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[i] for i in check_ids(ids, self.vocab_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "chars": "".join(self.chars)}

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


# ----------------------------------------------------------------------------------------------
# GPT-2 through tiktoken (optional, offline only)

# tiktoken caches a file under sha1(its address); the gpt2 encoding's two files have had two
# spellings of their address across tiktoken releases.
_GPT2_FILES = {
    "vocab.bpe": (
        "az://openaipublic/gpt-2/encodings/main/vocab.bpe",
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
    ),
    "encoder.json": (
        "az://openaipublic/gpt-2/encodings/main/encoder.json",
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
    ),
}


def _tiktoken_cache_dirs() -> list[str]:
    """Where tiktoken looks for its cached files, in its order."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return [os.environ[var]] if os.environ[var] else []
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [os.path.join(xdg, "tiktoken"), os.path.join(tempfile.gettempdir(), "data-gym-cache")]


def _gpt2_files_cached() -> bool:
    import hashlib

    dirs = _tiktoken_cache_dirs()
    return all(
        any(os.path.exists(os.path.join(d, hashlib.sha1(url.encode()).hexdigest())) for d in dirs for url in urls)
        for urls in _GPT2_FILES.values()
    )


class GPT2Tokenizer:
    """tiktoken's ``gpt2`` encoding (50,257 tokens, ``<|endoftext|>`` = 50256), as in the book."""

    kind = "gpt2"

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding

    @property
    def vocab_size(self) -> int:
        return int(self.encoding.n_vocab)

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode(check_text(text), allowed_special={"<|endoftext|>"}))

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.encoding.decode(check_ids(ids, self.vocab_size)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "encoding": "gpt2"}

    def __repr__(self) -> str:
        return "GPT2Tokenizer(vocab_size=50257, tiktoken)"


def gpt2_tokenizer() -> GPT2Tokenizer:
    """tiktoken's GPT-2 encoding, from files already in tiktoken's cache (never downloaded).

    Raises:
        ConfigError: tiktoken is not installed, or its gpt2 files are not cached on this machine.
    """
    try:
        import tiktoken
    except ImportError:
        raise ConfigError(
            "the gpt2 tokenizer needs tiktoken (pip install tiktoken) and its gpt2 files in tiktoken's "
            "cache; offline, use the char or bpe tokenizer"
        ) from None
    if not _gpt2_files_cached():
        raise ConfigError(
            "tiktoken is installed but the gpt2 encoding's files (vocab.bpe, encoder.json) are not in its cache "
            f"({', '.join(_tiktoken_cache_dirs()) or 'caching disabled'}); npattn never downloads them: run "
            "`python -c \"import tiktoken; tiktoken.get_encoding('gpt2')\"` once on a machine with network "
            "access (or set TIKTOKEN_CACHE_DIR), or use the char or bpe tokenizer"
        )
    try:
        return GPT2Tokenizer(tiktoken.get_encoding("gpt2"))
    except Exception as exc:  # tiktoken's own errors (bad cache entry, missing plugin)
        raise ConfigError(f"tiktoken could not load the gpt2 encoding: {type(exc).__name__}: {exc}") from None


# ----------------------------------------------------------------------------------------------
# Building, saving, loading


BPE_VOCAB_SIZE = 1024  # train_tokenizer's BPE vocabulary when none is given


def train_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """A tokenizer of ``kind`` ("char", "bpe" or "gpt2") for ``text``. ``vocab_size`` is the BPE's
    (default 1024); the char vocabulary is the text's characters, gpt2's is fixed.

    Raises:
        ConfigError: an unknown kind, a ``vocab_size`` for char or gpt2, or the errors of each kind.
    """
    if kind not in TOKENIZER_KINDS:
        raise ConfigError(f"unknown tokenizer {kind!r}; choose one of {', '.join(TOKENIZER_KINDS)}")
    if vocab_size is not None and kind != "bpe":
        raise ConfigError(f"vocab_size applies to the bpe tokenizer only; the {kind} vocabulary is fixed")
    if kind == "char":
        return CharTokenizer.train(text)
    if kind == "bpe":
        return BPETokenizer.train(text, BPE_VOCAB_SIZE if vocab_size is None else vocab_size)
    return gpt2_tokenizer()


def text_to_token_ids(text: str, tokenizer: Tokenizer) -> np.ndarray:
    """The book's helper: ``text`` encoded as a (1, n) int64 batch."""
    return np.array([tokenizer.encode(text)], dtype=np.int64).reshape(1, -1)


def token_ids_to_text(token_ids: Any, tokenizer: Tokenizer) -> str:
    """The book's helper: a (1, n) batch (or a flat sequence) of ids decoded to text."""
    arr = np.asarray(token_ids)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    return tokenizer.decode(arr)


def __getattr__(name: str) -> Any:
    """``tokenizer_from_dict``, ``save_tokenizer`` and ``load_tokenizer`` at their old address (they
    live in ``npattn.train.tokenizer_files``, which imports this module)."""
    if name in ("tokenizer_from_dict", "save_tokenizer", "load_tokenizer"):
        from npattn.train import tokenizer_files

        return getattr(tokenizer_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
