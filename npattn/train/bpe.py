"""The byte-level BPE (GPT-2's scheme on a small scale): the split pattern and the probe text every
pattern must cover, the merges learned from a text, and ``BPETokenizer``.

The 256 bytes are the first 256 tokens; the text is split into pieces (words with their leading
space, numbers, punctuation runs, whitespace) by GPT-2's regular expression written with Python's
``re`` classes (``GPT2_SPLIT``: it differs from GPT-2's on numeric characters that are not decimal
digits, such as ² and ½, which it takes as letters), and the most
frequent adjacent pair of tokens inside the pieces is merged into a new token until ``vocab_size``
tokens exist. Ties go to the smallest pair of ids, so training is deterministic. Encoding applies
the merges in the order they were learned; decoding joins the bytes. Every Python string
round-trips exactly (lone surrogates included, through UTF-8's ``surrogatepass``).
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from npattn._checks import check_positive_int
from npattn.errors import ConfigError
from npattn.train.tokenizer_checks import check_ids, check_text

__all__ = ["GPT2_SPLIT", "PATTERN_PROBE", "BPETokenizer"]

# GPT-2's pre-tokenizer, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
# written with the standard library's `re` classes, so GPT-2-style rather than GPT-2's own: [^\W\d_]
# for a letter also takes the numeric characters that are not decimal digits (Unicode's No and Nl:
# "x²" is one piece, GPT-2 splits it), \d takes decimal digits only ("12½" is two pieces, one for
# GPT-2), (?:[^\s\w]|_) is anything that is neither space, letter nor digit. Every character falls in
# one alternative, so the pieces cover the text and every string round-trips all the same.
PATTERN_PROBE = "Hello, world! It's 42_x\n\t\r  \u00fc\u03a9 \u4f60\u597d \U0001f642 \x00\x7f\x1b\u00a0\u2028 ... end "
"""Every class of character (letters, digits, punctuation, whitespace, controls, other scripts, emoji)."""
GPT2_SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""


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
        text = check_text(text)
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
        text = check_text(text)
        out: list[int] = []
        for piece in self._pieces(text):
            out.extend(self._encode_piece(piece))
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 (a sequence cut inside a character,
        as sampling can produce) become U+FFFD, like tiktoken's decode."""
        data = b"".join(self.token_bytes[i] for i in check_ids(ids, self.vocab_size))
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "merges": [list(m) for m in self.merges], "pattern": self.pattern}

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"
