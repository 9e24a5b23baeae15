"""Tokenizers as plain JSON: ``tokenizer_from_dict`` rebuilds one from ``to_dict()`` (a ``.json``
file or the entry inside a language-model checkpoint), ``save_tokenizer`` / ``load_tokenizer``
write and read the file.

What is read is untrusted: only a regular file of at most ``MAX_TOKENIZER_BYTES`` is read (a FIFO
or /dev/zero is refused before it is opened), and a BPE description must use npattn's GPT-2-style
split pattern (``bpe.GPT2_SPLIT``), the only one npattn writes: a regular expression from a file
could backtrack for days (``(a+)+$``) or drop characters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from npattn._checks import repeated_keys
from npattn.errors import CheckpointError, ConfigError
from npattn.train.atomic import atomic_write, check_source, read_bytes
from npattn.train.tokenizers import (
    GPT2_SPLIT,
    TOKENIZER_KINDS,
    TOKENIZERS_SHOWN,
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    gpt2_tokenizer,
)

__all__ = ["MAX_TOKENIZER_BYTES", "load_tokenizer", "save_tokenizer", "tokenizer_from_dict"]

MAX_TOKENIZER_BYTES = 64 * 2**20
"""The largest tokenizer file read (GPT-2's 50,000 merges take about 1 MB as JSON)."""

_FIELDS = {"char": ("chars",), "bpe": ("merges", "pattern"), "gpt2": ()}
_OPTIONAL = {"char": (), "bpe": (), "gpt2": ("encoding",)}  # written by to_dict, checked when present


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique (json keeps the last of repeated keys without a word)."""
    repeated = repeated_keys(pairs)
    if repeated:
        raise ValueError(f"the key(s) {repeated} appear more than once in one object")
    return dict(pairs)


def tokenizer_from_dict(state: Any) -> Tokenizer:
    """Rebuild a tokenizer from ``to_dict()``.

    Raises:
        ConfigError: not a tokenizer description (unknown kind, missing or malformed fields, a BPE
            split pattern other than npattn's GPT-2-style ``GPT2_SPLIT``).
    """
    if not isinstance(state, Mapping):
        json_names = {"list": "a list", "str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}
        got = json_names.get(type(state).__name__, type(state).__name__) if state is not None else "null"
        raise ConfigError(
            f"not a tokenizer description: it must be a JSON object such as {{\"kind\": \"char\", ...}}, got {got}"
        )
    if state.get("kind") not in TOKENIZER_KINDS:
        kind = state.get("kind")
        raise ConfigError(f"not a tokenizer description: kind {kind!r} (expected one of {', '.join(TOKENIZER_KINDS)})")
    kind = state["kind"]
    missing = [key for key in _FIELDS[kind] if key not in state]
    known = ("kind", *_FIELDS[kind], *_OPTIONAL[kind])
    unknown = sorted(str(key) for key in state if key not in known)
    if missing or unknown:
        problem = f"the key(s) {', '.join(map(repr, missing))} are missing" if missing else ""
        problem += ("; " if missing and unknown else "") + (f"unknown key(s) {unknown}" if unknown else "")
        raise ConfigError(
            f"malformed {kind} tokenizer description: {problem} "
            f"(a {kind} tokenizer has {', '.join(map(repr, ('kind', *_FIELDS[kind])))})"
        )
    if kind == "char":
        if not isinstance(state["chars"], str):
            got = f"{state['chars']!r:.40}"
            raise ConfigError(f"malformed char tokenizer description: chars must be a string, got {got}")
        return CharTokenizer(state["chars"])
    if kind == "bpe":
        merges, pattern = state["merges"], state["pattern"]
        if not isinstance(merges, (list, tuple)) or not all(
            isinstance(m, (list, tuple)) and len(m) == 2 and all(type(v) is int for v in m) for m in merges
        ):
            raise ConfigError("malformed bpe tokenizer description: merges must be a list of pairs of integers")
        if pattern != GPT2_SPLIT:
            raise ConfigError(
                f"malformed bpe tokenizer description: the split pattern {pattern!r:.60} is not npattn's GPT-2-style "
                "pattern (npattn.train.bpe.GPT2_SPLIT), the only one npattn writes (a pattern from a file could "
                "take exponential time or drop characters)"
            )
        return BPETokenizer([(a, b) for a, b in merges], pattern)
    if state.get("encoding", "gpt2") != "gpt2":
        raise ConfigError(f"malformed gpt2 tokenizer description: encoding {state['encoding']!r:.40}, expected 'gpt2'")
    return gpt2_tokenizer()


def save_tokenizer(tokenizer: Tokenizer, path: str | os.PathLike[str]) -> None:
    """Write ``tokenizer.to_dict()`` as JSON to ``path`` (atomically: the old file or the new one).

    Raises:
        ConfigError: ``tokenizer`` is not a tokenizer (no ``to_dict``), e.g. the name "bpe", or its
            ``to_dict()`` is not JSON or not a description ``load_tokenizer`` reads back as it is
            (nothing is written then: the old file stays).
        CheckpointError: a target ``npattn.save`` would refuse too.
    """
    if not callable(getattr(tokenizer, "to_dict", None)):
        got = f"str {tokenizer!r}" if isinstance(tokenizer, str) else type(tokenizer).__name__
        raise ConfigError(
            f"save_tokenizer expects a tokenizer ({TOKENIZERS_SHOWN}), got {got}"
        )
    name = f"save_tokenizer: {type(tokenizer).__name__}.to_dict()"
    try:  # never a file load_tokenizer refuses (an object with to_dict replaced a good file with junk)
        text = json.dumps(tokenizer.to_dict(), ensure_ascii=True, allow_nan=False)
        written = json.loads(text)
        back = json.loads(json.dumps(tokenizer_from_dict(written).to_dict(), ensure_ascii=True))
    except ConfigError as exc:
        raise ConfigError(f"{name} is no description load_tokenizer reads back ({exc}); nothing was written") from None
    except (TypeError, ValueError, RecursionError) as exc:  # a set, NaN, a cycle: not JSON
        raise ConfigError(f"{name} cannot be written as JSON ({exc}); nothing was written") from None
    if back != written:
        raise ConfigError(
            f"{name} does not read back as itself (load_tokenizer would rebuild another); nothing was written"
        )
    atomic_write(path, text.encode("ascii"), what="tokenizer")


def _what_it_is(data: bytes) -> str:
    """What a file that is no tokenizer JSON looks like, when it can be told from its first bytes."""
    if data.startswith(b"PK\x03\x04"):
        return (
            "it is a zip archive (an npattn checkpoint?), not a tokenizer's JSON; a language-model checkpoint holds "
            "its tokenizer as JSON text: npattn.train.tokenizer_from_dict(json.loads(npattn.load(path)['tokenizer'])). "
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "it is UTF-16 text; a tokenizer file is UTF-8 JSON (save it as UTF-8). "
    return ""


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read a tokenizer written by ``save_tokenizer``.

    Raises:
        CheckpointError: the file is missing, not a regular file (a FIFO, a device), larger than
            ``MAX_TOKENIZER_BYTES`` or not JSON. ConfigError: JSON that is not a tokenizer.
    """
    source = check_source(path, "tokenizer file")
    data = read_bytes(source, "tokenizer file", limit=MAX_TOKENIZER_BYTES)
    try:
        # a byte-order mark is dropped, as --text drops it; repeated keys are refused (json keeps the last)
        state = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: bad JSON, a 5000-digit number
        what = f"cannot read the tokenizer file {source!r}: {_what_it_is(data)}"
        if isinstance(exc, RecursionError):  # Python's advice (raise a limit) is no advice for an untrusted file
            raise CheckpointError(f"{what}its JSON is nested too deeply to read; no tokenizer is") from None
        if "integer string conversion" in str(exc):
            raise CheckpointError(f"{what}it holds a number of over 4300 digits; no tokenizer does") from None
        raise CheckpointError(f"{what}{type(exc).__name__}: {exc}") from None
    return tokenizer_from_dict(state)
