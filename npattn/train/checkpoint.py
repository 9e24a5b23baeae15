"""Checkpoints that lose nothing and run nothing: ``npattn.save(obj, path)`` / ``npattn.load(path)``.

Format (``.npz``, a zip of ``.npy`` arrays, never a pickle):

- every array of the state dict is one member, stored uncompressed, named by its path
  (``W_query``, ``optimizer/state/0/exp_avg``, ...) when the keys are plain names, else ``@<n>``;
- the member ``__npattn__`` holds one JSON string: ``{"format": "npattn-checkpoint", "version": 1,
  "class": ..., "config": {...}, "tree": ...}``. ``tree`` records the nesting (dicts with their key
  types, lists, tuples), the plain values (ints, floats, bools, strings, None) and, for arrays, the
  member that holds them, so a nested state dict (an optimizer's, a training run's) comes back
  exactly as it was saved.

Saving checks the index with the same function loading uses before anything is written, so
``save`` never writes a file that ``load`` refuses. Loading never unpickles (``allow_pickle=False``)
and is bounded by the file's size: from the zip directory and each member's ``.npy`` header, before
any array is read, it refuses compressed members (a zip bomb), members that overlap or declare more
bytes than the file holds (a huge shape), repeated names, and anything the index does not list.
Writing is atomic (``npattn.train.atomic``): a temporary file in the target's folder, flushed,
fsync'ed and renamed over the target, so a crash leaves the previous checkpoint or the new one.

A path ending in ``.safetensors`` uses the safetensors format instead (the optional extra
``safetensors``; ``npattn.train.safetensors_io``): a flat name -> array state dict, readable by
``safetensors.torch.load_file``.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import pickletools
import re
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError
from npattn.train.atomic import atomic_write, check_source, check_target, sigint_held
from npattn.train.module_config import constructor_config

__all__ = ["FORMAT", "VERSION", "load", "load_metadata", "save", "save_run"]

FORMAT = "npattn-checkpoint"
VERSION = 1
META_KEY = "__npattn__"
RESERVED = ("format", "version", "tree", "class", "config", "index_sha256")  # index keys that metadata cannot set
MAX_DEPTH = 64  # nesting of dicts/lists/tuples a checkpoint may hold
_SCALARS = (bool, int, float, str, type(None))
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


# ----------------------------------------------------------------------------------------------
# The tree: nested state -> (JSON-able description, {member name: array}) and back.


def _member_name(keys: list[Any], arrays: Mapping[str, np.ndarray]) -> str:
    """The path of plain keys (``optimizer/state/0/exp_avg``), or ``@<n>`` when that would not be safe."""
    parts = [str(k) for k in keys]
    name = "/".join(parts)
    plain = all(_PLAIN_NAME.fullmatch(part) and part not in (".", "..") for part in parts)
    if not plain or not parts or name == META_KEY or name.endswith(".npy") or len(name) > 1000 or name in arrays:
        name = f"@{len(arrays)}"
    return name


def _where(keys: list[Any]) -> str:
    return "state" + "".join(f"[{k!r}]" for k in keys)


def _encode(value: Any, keys: list[Any], arrays: dict[str, np.ndarray], active: set[int]) -> Any:
    if len(keys) > MAX_DEPTH:
        raise CheckpointError(f"cannot save {_where(keys[:3])}...: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, np.ma.MaskedArray):
        raise CheckpointError(
            f"cannot save {_where(keys)}: a masked array (its mask would be lost); save .data and .mask"
        )
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot save {_where(keys)}: dtype {arr.dtype} (only bool, int and float arrays)")
        name = _member_name(keys, arrays)
        arrays[name] = arr
        return {"array": name, "scalar": isinstance(value, np.generic)}
    if isinstance(value, _SCALARS):
        return {"value": value}
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in active:
            raise CheckpointError(f"cannot save {_where(keys)}: it contains itself")
        active.add(id(value))
        try:
            if isinstance(value, Mapping):
                items = []
                for key, item in value.items():
                    if isinstance(key, bool) or not isinstance(key, (str, int)):
                        raise CheckpointError(f"cannot save {_where(keys)}: keys must be str or int, got {key!r}")
                    items.append([key, _encode(item, [*keys, key], arrays, active)])
                return {"dict": items}
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {kind: [_encode(item, [*keys, i], arrays, active) for i, item in enumerate(value)]}
        finally:
            active.discard(id(value))
    raise CheckpointError(
        f"cannot save {_where(keys)} of type {type(value).__name__}: checkpoints hold arrays, numbers, "
        "strings, None, and dicts/lists/tuples of them (never pickled objects)"
    )


def _check_tree(node: Any, names: list[str], depth: int = 0) -> None:
    """Raise CheckpointError unless ``node`` is a tree ``_encode`` writes; collect its member names."""
    if depth > MAX_DEPTH + 1:
        raise CheckpointError(f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise CheckpointError(f"corrupt tree entry {node!r:.80}")
    if "array" in node:
        if (
            set(node) != {"array", "scalar"}
            or not isinstance(node["array"], str)
            or not isinstance(node["scalar"], bool)
        ):
            raise CheckpointError(f"corrupt tree entry {node!r:.80}")
        names.append(node["array"])
    elif "value" in node:
        if len(node) != 1 or not isinstance(node["value"], _SCALARS):
            raise CheckpointError(f"corrupt tree entry {node!r:.80}")
    elif "dict" in node and len(node) == 1 and isinstance(node["dict"], list):
        for entry in node["dict"]:
            key_ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], (str, int))
            if not key_ok or isinstance(entry[0], bool):
                raise CheckpointError(f"corrupt dict entry {entry!r:.80} (expected [key, value])")
            _check_tree(entry[1], names, depth + 1)
        keys = [entry[0] for entry in node["dict"]]
        if len(set(map(repr, keys))) != len(keys):
            raise CheckpointError("a dict lists the same key twice")
    elif len(node) == 1 and isinstance(items := node.get("list", node.get("tuple")), list):
        for item in items:
            _check_tree(item, names, depth + 1)
    else:
        raise CheckpointError(f"corrupt tree entry {node!r:.80}")


def _decode(node: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """The state ``_encode`` described (``node`` already passed ``_check_tree``)."""
    if "array" in node:
        arr = arrays[node["array"]]
        return arr[()] if node["scalar"] else arr
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {key: _decode(item, arrays) for key, item in node["dict"]}
    if "list" in node:
        return [_decode(item, arrays) for item in node["list"]]
    return tuple(_decode(item, arrays) for item in node["tuple"])


# ----------------------------------------------------------------------------------------------
# The index (header): the one check that both save and load run.


def check_json(value: Any, where: str, depth: int = 0) -> None:
    """Metadata must come back as it was: dicts with str keys, lists, str, int, float, bool, None."""
    if depth > MAX_DEPTH:
        raise CheckpointError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CheckpointError(f"metadata keys must be str (JSON object keys), got {key!r} in {where}")
            check_json(item, f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]", depth + 1)
    elif not isinstance(value, _SCALARS):
        hint = " (use a list)" if isinstance(value, tuple) else ""
        raise CheckpointError(
            f"{where} is a {type(value).__name__}{hint}: metadata is JSON, so it holds dicts with "
            "str keys, lists, strings, numbers, booleans and None"
        )


def _check_header(header: Any) -> list[str]:
    """Raise CheckpointError unless ``header`` is a valid index; return the member names its tree uses."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"the {META_KEY!r} entry does not describe an npattn checkpoint")
    version = header.get("version")
    if type(version) is not int or version != VERSION:
        raise CheckpointError(f"has checkpoint format version {version!r}; this npattn reads version {VERSION}")
    if "tree" not in header:
        raise CheckpointError(f"the {META_KEY!r} entry has no 'tree' (the nesting of the state)")
    if not (header.get("class") is None or isinstance(header.get("class"), str)):
        raise CheckpointError(f"the index's 'class' must be a string or null, got {header.get('class')!r:.60}")
    if not isinstance(header.get("config", {}), dict):
        raise CheckpointError(f"the index's 'config' must be an object, got {header.get('config')!r:.60}")
    check_json({k: v for k, v in header.items() if k != "tree"}, "index")
    names: list[str] = []
    _check_tree(header["tree"], names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CheckpointError(f"the index names the member(s) {repeated} more than once")
    return names


def _index_sha256(header: dict[str, Any]) -> str:
    """SHA-256 of the index (class, config, tree, metadata) without its own ``index_sha256``."""
    index = {k: v for k, v in header.items() if k != "index_sha256"}
    return hashlib.sha256(json.dumps(index, sort_keys=True).encode("utf-8")).hexdigest()


def _parse_header(text: str) -> tuple[dict[str, Any], list[str]]:
    try:
        header = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CheckpointError(f"the {META_KEY!r} entry is not valid JSON ({reason})") from None
    return header, _check_header(header)


def _check_index_sha256(header: dict[str, Any], path: str) -> None:
    """Refuse an index edited inside the file (absent in files written before it was recorded)."""
    if "index_sha256" in header and header["index_sha256"] != _index_sha256(header):
        raise CheckpointError(
            f"{path!r}: its index was edited after it was written (class, config, metadata or tree no longer "
            "match its 'index_sha256'); save the object again instead of editing the file"
        )


# ----------------------------------------------------------------------------------------------
# save


def _state_and_meta(
    obj: Any, metadata: Mapping[str, Any] | None, own: Mapping[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """A Module or Optimizer gives its state_dict and class name; a mapping is saved as it is, with
    the class and config ``own`` names (a training run's model)."""
    meta: dict[str, Any] = {"class": None, "config": {}, **(own or {})}
    state = obj
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        meta["class"] = type(obj).__name__
        state = obj.state_dict()
        meta["config"] = constructor_config(obj)
    if not isinstance(state, Mapping):
        raise CheckpointError(
            f"save expects a state dict (a mapping), a Module or an Optimizer, got {type(obj).__name__}"
        )
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise CheckpointError(f"metadata must be a dict, got {type(metadata).__name__}")
        reserved = sorted(k for k in metadata if k in RESERVED)
        if reserved:
            raise CheckpointError(
                f"metadata keys {reserved} are reserved for the checkpoint's own index (format, version, tree, "
                "and the class and config of what was saved)"
            )
        meta.update(metadata)
    check_json(meta, "metadata")
    return state, meta


def save(obj: Any, path: str | os.PathLike[str], *, metadata: Mapping[str, Any] | None = None) -> None:
    """Save a state dict (or a Module's / Optimizer's) to ``path``, atomically.

    ``metadata`` (JSON: class, config, ...) is stored beside the arrays; read it back with
    ``load_metadata``. A ``.safetensors`` path needs the ``safetensors`` package and a flat
    name -> array state dict. Everything is checked before the target is touched: what ``save``
    writes, ``load`` reads back exactly.

    Raises:
        CheckpointError: values that cannot be stored without pickling (objects, string arrays),
            a state that contains itself or nests deeper than 64 levels, metadata that is not JSON
            or sets a reserved key (format, version, tree, class, config), a .safetensors path without the package
            or with a nested state, or a target that is a directory, a device or a FIFO, is not
            writable, or whose folder does not exist (see ``npattn.train.atomic``).
    """
    with sigint_held():  # Ctrl-C while the zip is written would leave a half-written ZipFile
        _save(obj, path, metadata)


def save_run(state: Mapping[str, Any], path: str | os.PathLike[str], model_class: str, config: dict[str, Any]) -> None:
    """``save`` of a training run's state, recording the class and config of the model it trains
    (the index entries that ``save``'s metadata may not set)."""
    with sigint_held():
        _save(state, path, None, {"class": model_class, "config": config})


def _save(obj: Any, path: Any, metadata: Mapping[str, Any] | None, own: Mapping[str, Any] | None = None) -> None:
    target = check_target(path)
    state, meta = _state_and_meta(obj, metadata, own)
    if target.lower().endswith(".safetensors"):
        from npattn.train.safetensors_io import safetensors_bytes

        atomic_write(path, safetensors_bytes(state, meta))
        return
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(state, [], arrays, set())
    index = {"format": FORMAT, "version": VERSION, **meta, "tree": tree}
    header_text = json.dumps({**index, "index_sha256": _index_sha256(index)})
    _parse_header(header_text)  # the loader's own check: a file load refuses is never written
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:  # what np.savez writes
        for name, arr in {META_KEY: np.array(header_text), **arrays}.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)
    atomic_write(path, buffer.getvalue())


# ----------------------------------------------------------------------------------------------
# load: bounded by the file's size, checked from the zip directory and the .npy headers first


def _looks_like_pickle(head: bytes) -> bool:
    """True if ``head`` parses as (the start of) a pickle with protocol 2-5; nothing is executed."""
    if len(head) < 2 or head[0] != 0x80 or not 2 <= head[1] <= 5:
        return False
    count = 0
    try:
        for _ in pickletools.genops(io.BytesIO(head)):
            count += 1
    except ValueError as exc:
        return "exhausted" in str(exc) and count >= 2
    return True


def _npy_header(f: Any, name: str, path: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise CheckpointError(
        f"{path!r}: member {name!r} is an .npy file of version {version}, which npattn does not write"
    )


class _Npz:
    """An npattn .npz opened for reading, every member checked against the directory and its header."""

    def __init__(self, path: str) -> None:
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if head[:6] == b"\x93NUMPY":
            raise CheckpointError(f"{path!r} is a single .npy array, not an npattn checkpoint (.npz)")
        if _looks_like_pickle(head):
            raise CheckpointError(f"{path!r} contains pickled data; npattn never loads pickles (a raw pickle file)")
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
            raise CheckpointError(
                f"{path!r} is truncated, corrupt or not a checkpoint: not a zip archive (it starts with {head[:8]!r})"
            )
        self.zip = zipfile.ZipFile(path)
        infos = self.zip.infolist()
        names = [info.filename for info in infos]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise CheckpointError(f"{path!r}: the zip lists the member(s) {repeated} more than once")
        members = [n[:-4] if n.endswith(".npy") else n for n in names]
        if META_KEY not in members:
            shown = ", ".join(members[:5]) + (", ..." if len(members) > 5 else "")
            raise CheckpointError(
                f"{path!r} is an .npz file but not an npattn checkpoint (no {META_KEY!r} entry; members: {shown})"
            )
        for info in infos:
            if not info.filename.endswith(".npy") or info.flag_bits & 0x1:
                what = "encrypted" if info.flag_bits & 0x1 else "not an .npy array"
                raise CheckpointError(f"{path!r}: member {info.filename!r} is {what}; npattn writes plain .npy members")
            if info.compress_type != zipfile.ZIP_STORED:
                raise CheckpointError(
                    f"{path!r}: member {info.filename!r} is compressed; npattn stores members uncompressed, and "
                    "a compressed member could inflate without bound (a zip bomb), so it is refused"
                )
        declared = sum(info.file_size for info in infos)
        if declared > size:
            raise CheckpointError(
                f"{path!r}: the zip directory declares {declared} bytes of members in a file of {size} bytes "
                "(overlapping or truncated members)"
            )
        self.infos = {m: info for m, info in zip(members, infos)}

    def header(self) -> tuple[dict[str, Any], list[str]]:
        text = self.read(META_KEY)
        if text.dtype.kind != "U" or text.shape != ():
            raise CheckpointError(f"{self.path!r}: the {META_KEY!r} entry is not the text an npattn checkpoint holds")
        try:
            header, names = _parse_header(str(text[()]))
        except CheckpointError as exc:
            sep = " " if str(exc).startswith("has ") else ": "
            raise CheckpointError(f"{self.path!r}{sep}{exc}") from None
        missing = sorted(set(names) - set(self.infos))
        extra = sorted(set(self.infos) - set(names) - {META_KEY})
        if missing or extra:
            raise CheckpointError(
                f"{self.path!r}: members do not match the index (missing {missing}, unexpected {extra})"
            )
        return header, names

    def check(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype from the member's .npy header, refused unless they fill the member exactly."""
        info = self.infos[name]
        with self.zip.open(info) as f:
            shape, _, dtype = _npy_header(f, name, self.path)
            header_bytes = f.tell()
        if dtype.hasobject:
            raise CheckpointError(
                f"{self.path!r} contains pickled data (member {name!r} is an object array); npattn never loads pickles"
            )
        if dtype.kind not in "biufU" or (dtype.kind == "U" and name != META_KEY):
            raise CheckpointError(f"{self.path!r}: member {name!r} is not a numeric .npy array (dtype {dtype})")
        nbytes = math.prod(shape) * dtype.itemsize
        if header_bytes + nbytes != info.file_size:
            raise CheckpointError(
                f"{self.path!r}: member {name!r} declares shape {shape} ({nbytes} bytes of {dtype}) but holds "
                f"{info.file_size - header_bytes} bytes"
            )
        return shape, dtype

    def read(self, name: str) -> np.ndarray:
        self.check(name)
        with self.zip.open(self.infos[name]) as f:
            return np.lib.format.read_array(f, allow_pickle=False)


def _open_npz(path: str, read_arrays: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and (if ``read_arrays``) the arrays of an npattn .npz; never unpickles anything."""
    try:
        npz = _Npz(path)
        with npz.zip:
            header, names = npz.header()
            arrays = {}
            scalars = set(_scalar_names(header["tree"]))
            for name in names:
                shape, _ = npz.check(name)
                if name in scalars and shape != ():
                    raise CheckpointError(f"{path!r}: the index marks member {name!r} of shape {shape} as a scalar")
                if read_arrays:
                    arrays[name] = npz.read(name)
            _check_index_sha256(header, path)  # after the members: a specific problem is named first
    except CheckpointError:
        raise
    except PermissionError as exc:  # the OS refuses: not a corrupt file
        raise CheckpointError(f"cannot read checkpoint {path!r}: {exc.strerror or exc}") from None
    except (
        OSError, EOFError, ValueError, zipfile.BadZipFile, KeyError, UnicodeDecodeError, RecursionError,
        NotImplementedError,  # a corrupt directory entry: "zip file version 11.9", an unknown compression
    ) as exc:  # fmt: skip
        raise CheckpointError(
            f"{path!r} is truncated, corrupt or not a checkpoint: {type(exc).__name__}: {exc}"
        ) from None
    return header, arrays


def load(path: str | os.PathLike[str]) -> Any:
    """Load what ``save`` wrote: the state dict (nested dicts, lists, tuples and arrays as saved).

    Raises:
        CheckpointError: the file is missing, not a regular file, truncated, random bytes, a foreign
            .npz/.npy, holds a pickled object (refused, never executed), has compressed, repeated,
            overlapping or oversized members, or its members do not match its own index.
    """
    source = check_source(path)
    if source.lower().endswith(".safetensors"):
        from npattn.train.safetensors_io import load_safetensors

        return load_safetensors(source)[0]
    header, arrays = _open_npz(source, read_arrays=True)
    return _decode(header["tree"], arrays)


def _scalar_names(node: Any) -> list[str]:
    if "array" in node:
        return [node["array"]] if node["scalar"] else []
    if "dict" in node:
        return [n for _, item in node["dict"] for n in _scalar_names(item)]
    if "list" in node or "tuple" in node:
        return [n for item in node.get("list", node.get("tuple")) for n in _scalar_names(item)]
    return []


def load_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata saved with a checkpoint: format, version, class, config and any extra keys.

    The whole file is checked as ``load`` checks it, except that no array is read.
    """
    source = check_source(path)
    if source.lower().endswith(".safetensors"):
        from npattn.train.safetensors_io import load_safetensors

        return load_safetensors(source)[1]
    header, _ = _open_npz(source, read_arrays=False)
    return {k: v for k, v in header.items() if k not in ("tree", "index_sha256")}
