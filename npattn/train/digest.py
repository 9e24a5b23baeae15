"""A run checkpoint's digest of its own contents: resume refuses a checkpoint edited after the run wrote it.

``npattn train`` (``train_task``) and ``npattn train --task lm`` (``run_lm``) store
``state_digest(state)`` as one more top-level entry, ``"digest"``, of every checkpoint they write,
and on resume recompute it over every other entry before any other check. Many edits contradict
nothing a check can see (a loss of the history scaled, two parameters' Adam moments swapped, a word
of the dropout generator's state, two rows of an embedding swapped): the digest catches those.
It is a check against edits and mix-ups, not a signature: whoever edits a checkpoint on purpose
can compute a new digest, and the resume checks stay in place behind it.

The digest is SHA-256 over a canonical walk of the nested state, every token length-prefixed:

- dicts: their entries with the keys sorted (int keys before str keys), each key and value;
- lists and tuples alike: their length, then the items in order;
- arrays (one dimension or more): dtype (with its byte order), shape and C-order bytes;
- numbers by type class and exact value: bool, int (Python or NumPy integers, 0-d integer arrays)
  as a decimal, float (Python or NumPy floats, 0-d float arrays) as ``float.hex``;
- strings as UTF-8, None as itself.

``npattn.load`` gives back the types ``npattn.save`` wrote, and the walk treats the forms a
round trip could change alike (a tuple and a list, a NumPy scalar and a 0-d array, a Python and a
NumPy number), so a checkpoint's digest is the same before the save and after the load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError

__all__ = ["DIGEST_KEY", "stamped", "state_digest", "verified"]

DIGEST_KEY = "digest"


def _token(h: Any, tag: bytes, data: bytes | np.ndarray = b"") -> None:
    """``tag``, the byte count of ``data``, then ``data`` (a C-contiguous array is hashed in place)."""
    size = data.nbytes if isinstance(data, np.ndarray) else len(data)
    h.update(tag + size.to_bytes(8, "little"))
    h.update(data)


def _number(h: Any, value: Any) -> bool:
    """Feed a number (Python, NumPy scalar or 0-d array) to ``h``; False if ``value`` is none."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "biuf":
            return False
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        _token(h, b"b", b"1" if value else b"0")
    elif isinstance(value, (int, np.integer)):
        _token(h, b"i", str(int(value)).encode())
    elif isinstance(value, (float, np.floating)):
        _token(h, b"f", float(value).hex().encode())
    else:
        return False
    return True


def _key_order(key: Any) -> tuple[bool, Any]:
    return (isinstance(key, str), key if isinstance(key, str) else int(key))


def _walk(h: Any, value: Any, depth: int) -> None:
    if depth > 100:
        raise CheckpointError("cannot compute a digest of a state nested deeper than 100 levels")
    if value is None:
        _token(h, b"n")
    elif isinstance(value, str):
        _token(h, b"s", value.encode("utf-8", "surrogatepass"))
    elif _number(h, value):
        pass
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot compute a digest of an array of dtype {value.dtype}")
        _token(h, b"a", value.dtype.str.encode())
        _token(h, b"S", ",".join(map(str, value.shape)).encode())
        _token(h, b"B", np.ascontiguousarray(value).view(np.uint8).reshape(-1))
    elif isinstance(value, Mapping):
        keys = list(value)
        if any(isinstance(k, bool) or not isinstance(k, (str, int, np.integer)) for k in keys):
            raise CheckpointError(f"cannot compute a digest of a dict with keys {keys!r:.80}: str or int keys only")
        _token(h, b"d", str(len(keys)).encode())
        for key in sorted(keys, key=_key_order):
            _walk(h, key, depth + 1)
            _walk(h, value[key], depth + 1)
    elif isinstance(value, (list, tuple)):
        _token(h, b"l", str(len(value)).encode())
        for item in value:
            _walk(h, item, depth + 1)
    else:
        raise CheckpointError(f"cannot compute a digest of a {type(value).__name__}")


def state_digest(state: Any) -> str:
    """SHA-256 (64 hex digits) of ``state``'s canonical walk (see the module docstring).

    Raises:
        CheckpointError: a value a checkpoint cannot hold (an object, a complex or string array,
            a dict key that is neither str nor int), or nesting deeper than 100 levels.
    """
    h = hashlib.sha256(b"npattn-run-digest-1")
    _walk(h, state, 0)
    return h.hexdigest()


def stamped(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with its ``"digest"`` entry set to the digest of every other entry."""
    rest = {key: value for key, value in state.items() if key != DIGEST_KEY}
    return {**rest, DIGEST_KEY: state_digest(rest)}


def verified(saved: dict[str, Any], name: str) -> dict[str, Any]:
    """The entries of the run checkpoint ``saved`` (read from ``name``) other than its digest, once
    the digest matches them.

    Raises:
        CheckpointError: no digest entry (a checkpoint written before run checkpoints carried one,
            or one with it removed), or a digest that does not match the other entries.
    """
    rest = {key: value for key, value in saved.items() if key != DIGEST_KEY}
    if DIGEST_KEY not in saved:
        raise CheckpointError(
            f"{name!r} has no {DIGEST_KEY!r} entry: it predates run checkpoints that carry a digest of their contents, "
            "or the entry was removed (a run resumes only from a checkpoint it wrote; start the run again)"
        )
    if not isinstance(saved[DIGEST_KEY], str) or saved[DIGEST_KEY] != state_digest(rest):
        raise CheckpointError(
            f"{name!r} was changed after the run wrote it: its contents do not match the digest the run stored "
            "(a run resumes only from a checkpoint it wrote)"
        )
    return rest
