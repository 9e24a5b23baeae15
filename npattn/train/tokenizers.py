"""Tokenizers for training on text offline: characters, a byte-level BPE trained on the corpus, and
GPT-2's encoding through tiktoken when its files are already on this machine.

Every tokenizer has ``encode(text) -> list[int]``, ``decode(ids) -> str``, ``vocab_size``, ``kind``
and ``to_dict()`` (plain JSON: it is stored inside checkpoints, so a trained model always comes
back with the tokenizer it was trained with). ``npattn.train.tokenizer_files`` rebuilds one from
that dict (``tokenizer_from_dict``) and writes and reads it as a ``.json`` file.

- ``CharTokenizer.train(text)``: one token per distinct character of the corpus (sorted by code
  point). Exact round trip for any text made of those characters; any other character raises
  ``ConfigError`` naming it (the byte-level BPE encodes every text).
- ``BPETokenizer.train(text, vocab_size)``: GPT-2's scheme on a small scale. The 256 bytes are the
  first 256 tokens; the text is split into pieces (words with their leading space, numbers,
  punctuation runs, whitespace) by a regular expression like GPT-2's, and the most frequent
  adjacent pair of tokens inside the pieces is merged into a new token until ``vocab_size`` tokens
  exist. Ties go to the smallest pair of ids, so training is deterministic. Encoding applies the
  merges in the order they were learned; decoding joins the bytes. Every Python string round-trips
  exactly (lone surrogates included, through UTF-8's ``surrogatepass``).
- ``gpt2_tokenizer()``: tiktoken's ``gpt2`` encoding (the book's), only if tiktoken is installed
  and its two files are in tiktoken's cache; nothing is downloaded.
"""

from __future__ import annotations

import heapq
import itertools
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from npattn._checks import check_positive_int
from npattn.errors import ConfigError

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

# GPT-2's pre-tokenizer, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
# in the standard library's `re`: [^\W\d_] is a letter, (?:[^\s\w]|_) anything that is neither
# space, letter nor digit. Every character falls in one alternative, so the pieces cover the text.
PATTERN_PROBE = "Hello, world! It's 42_x\n\t\r  \u00fc\u03a9 \u4f60\u597d \U0001f642 \x00\x7f\x1b\u00a0\u2028 ... end "
"""Every class of character (letters, digits, punctuation, whitespace, controls, other scripts, emoji)."""
GPT2_SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""


class Tokenizer(Protocol):
    """What the training code needs from a tokenizer."""

    kind: str

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def _check_text(text: Any, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ConfigError(f"{name} must be a str, got {type(text).__name__}")
    return text


def _check_ids(ids: Any, vocab_size: int) -> list[int]:
    """Token ids as a flat list of Python ints in [0, vocab_size).

    Raises:
        ConfigError: a non-integer id, an id outside the vocabulary, or more than one axis.
    """
    arr = np.asarray(ids)
    if arr.size == 0:
        return []
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ConfigError(
            f"token ids must be a flat sequence of integers, got shape {arr.shape} dtype {arr.dtype} "
            "(decode one sequence at a time: ids[0] of a (1, n) batch)"
        )
    low, high = int(arr.min()), int(arr.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ConfigError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
    return [int(i) for i in arr]


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
        text = _check_text(text)
        if not text:
            raise ConfigError("cannot build a character vocabulary from an empty text")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        text = _check_text(text)
        try:
            return [self.stoi[c] for c in text]
        except KeyError as exc:
            c = exc.args[0]
            raise ConfigError(
                f"character {c!r} (U+{ord(c):04X}) is not in this character tokenizer's vocabulary of "
                f"{self.vocab_size} characters (those of its training text); the byte-level BPE encodes any text"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[i] for i in _check_ids(ids, self.vocab_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "chars": "".join(self.chars)}

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


# ----------------------------------------------------------------------------------------------
# Byte-level BPE


def _pair_counts(word: list[int]) -> Counter[tuple[int, int]]:
    return Counter(itertools.pairwise(word))


def _merge(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of ``pair`` (left to right) by ``new_id``."""
    out: list[int] = []
    i, n = 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _learn_merges(piece_counts: Mapping[str, int], vocab_size: int) -> list[tuple[int, int]]:
    """The merges of byte-level BPE on pieces with counts, until ``vocab_size`` tokens or no pair
    occurs twice. Incremental: a merge only revisits the pieces that contain its pair, and a heap
    with stale entries skipped finds the most frequent pair (ties: the smallest pair)."""
    words = [list(piece.encode("utf-8", "surrogatepass")) for piece in piece_counts]
    freqs = list(piece_counts.values())
    counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for w, (word, freq) in enumerate(zip(words, freqs)):
        for pair, k in _pair_counts(word).items():
            counts[pair] += k * freq
            where.setdefault(pair, set()).add(w)
    heap = [(-c, pair) for pair, c in counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while 256 + len(merges) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -neg:
            continue  # stale: the count changed after this entry was pushed
        if -neg < 2:
            break
        new_id = 256 + len(merges)
        merges.append(pair)
        changed: set[tuple[int, int]] = set()
        for w in sorted(where.pop(pair)):
            old = _pair_counts(words[w])
            words[w] = _merge(words[w], pair, new_id)
            new = _pair_counts(words[w])
            for p in old.keys() | new.keys():
                delta = (new.get(p, 0) - old.get(p, 0)) * freqs[w]
                if delta:
                    counts[p] += delta
                    changed.add(p)
                if p in new:
                    where.setdefault(p, set()).add(w)
                elif p in where:
                    where[p].discard(w)
        counts.pop(pair, None)
        for p in changed:
            if counts.get(p, 0) > 0:
                heapq.heappush(heap, (-counts[p], p))
            else:
                counts.pop(p, None)
    return merges


PROBE_SOURCE = (
    f"npattn's fixed probe text {PATTERN_PROBE!r} (a pattern must cover any text encode() may meet, "
    "not only the training text)"
)


def _cover(split: re.Pattern[str], pattern: str, text: str, source: str) -> list[str]:
    """The pieces ``split`` cuts ``text`` into, together exactly ``text``; ConfigError naming ``source``
    if its matches leave characters out (they would be dropped: the round trip must be exact)."""
    pieces: list[str] = []
    end = 0
    for match in split.finditer(text):
        if match.start() != end:
            break
        if match.end() > end:
            pieces.append(match.group())
            end = match.end()
    if end != len(text):
        raise ConfigError(
            f"BPETokenizer: the split pattern {pattern!r} leaves {text[end : end + 10]!r} (at offset {end}) of "
            f"{source} outside its matches; those characters would be dropped: the pattern must match the whole text"
        )
    return pieces


class BPETokenizer:
    """Byte-level byte-pair encoding: tokens 0-255 are the bytes, token ``256 + r`` is the merge
    ``merges[r] = (a, b)``, i.e. the bytes of token a followed by those of token b.

    Raises:
        ConfigError: merges that refer to tokens not yet defined or repeat an earlier merge; a pattern
            that does not compile.
    """

    kind = "bpe"

    def __init__(self, merges: Iterable[tuple[int, int]], pattern: str = GPT2_SPLIT) -> None:
        self.merges = [(int(a), int(b)) for a, b in merges]
        self.pattern = pattern
        try:
            self._split = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ConfigError(f"BPETokenizer: the split pattern does not compile: {exc}") from None
        self._pieces(PATTERN_PROBE, PROBE_SOURCE)  # a pattern that leaves characters out is refused now, not at encode
        self.ranks: dict[tuple[int, int], int] = {}
        self.token_bytes = [bytes([b]) for b in range(256)]
        for r, (a, b) in enumerate(self.merges):
            if not (0 <= a < 256 + r and 0 <= b < 256 + r):
                raise ConfigError(f"BPETokenizer: merge {r} ({a}, {b}) refers to a token not yet defined")
            if (a, b) in self.ranks:  # a second token for one pair: another vocabulary, other ids
                first = self.ranks[(a, b)] - 256
                raise ConfigError(
                    f"BPETokenizer: merge {r} ({a}, {b}) repeats merge {first} of the merges list; "
                    "each pair is merged once"
                )
            self.ranks[(a, b)] = 256 + r
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int = 1024, pattern: str = GPT2_SPLIT) -> BPETokenizer:
        """Learn ``vocab_size - 256`` merges from ``text`` (fewer if no pair occurs twice any more).

        Raises:
            ConfigError: ``vocab_size`` below 256 (the bytes alone) or an empty text.
        """
        text = _check_text(text)
        vocab_size = check_positive_int(vocab_size, "vocab_size")
        if vocab_size < 256:
            raise ConfigError(f"vocab_size of a byte-level BPE must be at least 256 (the bytes), got {vocab_size}")
        if not text:
            raise ConfigError("cannot train a BPE tokenizer on an empty text")
        try:  # judged on the training text first, then (by the constructor) on the fixed probe text
            _cover(re.compile(pattern), pattern, text, "the training text")
        except (re.error, TypeError):
            pass  # the constructor says it does not compile
        tokenizer = cls([], pattern)
        pieces = Counter(tokenizer._pieces(text, "the training text"))
        return cls(_learn_merges(pieces, vocab_size), pattern)

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    def _pieces(self, text: str, source: str = "the text") -> list[str]:
        """The pieces the split pattern cuts ``text`` into (see ``_cover``)."""
        return _cover(self._split, self.pattern, text, source)

    def _encode_piece(self, piece: str) -> list[int]:
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        ids = list(piece.encode("utf-8", "surrogatepass"))
        while len(ids) > 1:
            pair = min(itertools.pairwise(ids), key=lambda p: self.ranks.get(p, 1 << 62))
            if pair not in self.ranks:
                break
            ids = _merge(ids, pair, self.ranks[pair])
        if len(self._cache) < 200_000:
            self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        text = _check_text(text)
        out: list[int] = []
        for piece in self._pieces(text):
            out.extend(self._encode_piece(piece))
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 (a sequence cut inside a character,
        as sampling can produce) become U+FFFD, like tiktoken's decode."""
        data = b"".join(self.token_bytes[i] for i in _check_ids(ids, self.vocab_size))
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "merges": [list(m) for m in self.merges], "pattern": self.pattern}

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


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
        return list(self.encoding.encode(_check_text(text), allowed_special={"<|endoftext|>"}))

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.encoding.decode(_check_ids(ids, self.vocab_size)))

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
