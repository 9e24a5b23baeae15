"""Checkpoints that lose nothing and run nothing: ``npattn.save(obj, path)`` / ``npattn.load(path)``.

Format (``.npz``, a zip of ``.npy`` arrays, never a pickle):

- every array of the state dict is one member, named by its path (``W_query``,
  ``optimizer/state/0/exp_avg``, ...);
- the member ``__npattn__`` holds one JSON string: ``{"format": "npattn-checkpoint", "version": 1,
  "class": ..., "config": {...}, "tree": ...}``. ``tree`` records the nesting (dicts with their key
  types, lists, tuples), the plain values (ints, floats, bools, strings, None) and, for arrays, the
  member that holds them, so a nested state dict (an optimizer's, a training run's) comes back
  exactly as it was saved.

Loading uses ``numpy.load(allow_pickle=False)``: a file with a pickled object is refused before
anything in it is run. Writing is atomic: the bytes go to a temporary file in the target's folder,
which is flushed, fsync'ed and then renamed over the target (``os.replace``), so a crash at any
moment leaves either the previous checkpoint or the new one, never a broken file.

A path ending in ``.safetensors`` uses the safetensors format instead (the optional extra
``safetensors``): a flat name -> array state dict, readable by ``safetensors.torch.load_file``.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError

__all__ = ["FORMAT", "VERSION", "load", "load_metadata", "save"]

FORMAT = "npattn-checkpoint"
VERSION = 1
META_KEY = "__npattn__"
_SCALARS = (bool, int, float, str, type(None))


# ----------------------------------------------------------------------------------------------
# The tree: nested state -> (JSON-able description, {member name: array}) and back.


def _encode(value: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot save {path or 'value'}: dtype {arr.dtype} (only bool, int and float arrays)")
        if path in arrays:
            raise CheckpointError(f"cannot save: two entries map to the member name {path!r} (int and str keys?)")
        arrays[path] = arr
        return {"array": path, "scalar": isinstance(value, np.generic)}
    if isinstance(value, _SCALARS):
        return {"value": value}
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise CheckpointError(f"cannot save {path or 'state'}: keys must be str or int, got {key!r}")
            if isinstance(key, str) and ("/" in key or key == META_KEY):
                raise CheckpointError(f"cannot save key {key!r}: '/' and {META_KEY!r} are reserved")
            items.append([key, _encode(item, f"{path}/{key}" if path else str(key), arrays)])
        return {"dict": items}
    if isinstance(value, (list, tuple)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [_encode(item, f"{path}/{i}" if path else str(i), arrays) for i, item in enumerate(value)]}
    raise CheckpointError(
        f"cannot save {path or 'value'} of type {type(value).__name__}: checkpoints hold arrays, numbers, "
        "strings, None, and dicts/lists/tuples of them (never pickled objects)"
    )


def _decode(node: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise CheckpointError(f"corrupt checkpoint tree entry {node!r}")
    if "array" in node:
        arr = arrays[node["array"]]
        return arr[()] if node.get("scalar") else arr
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {key: _decode(item, arrays) for key, item in node["dict"]}
    if "list" in node:
        return [_decode(item, arrays) for item in node["list"]]
    if "tuple" in node:
        return tuple(_decode(item, arrays) for item in node["tuple"])
    raise CheckpointError(f"corrupt checkpoint tree entry {node!r}")


# ----------------------------------------------------------------------------------------------
# Atomic write.


def _atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never a mix.

    Steps: temporary file in the same folder -> write -> flush -> fsync -> os.replace -> fsync the
    folder. On any error the temporary file is removed and the previous ``path`` is untouched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------
# save / load


def _state_and_meta(obj: Any, metadata: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    """A Module or Optimizer gives its state_dict and class name; a mapping is saved as it is."""
    meta: dict[str, Any] = {"class": None, "config": {}}
    state = obj
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        meta["class"] = type(obj).__name__
        state = obj.state_dict()
        for name in ("d_in", "d_out"):
            if hasattr(obj, name):
                meta["config"][name] = getattr(obj, name)
    if not isinstance(state, Mapping):
        raise CheckpointError(
            f"save expects a state dict (a mapping), a Module or an Optimizer, got {type(obj).__name__}"
        )
    meta.update(metadata or {})
    return state, meta


def save(obj: Any, path: str | os.PathLike[str], *, metadata: Mapping[str, Any] | None = None) -> None:
    """Save a state dict (or a Module's / Optimizer's) to ``path``, atomically.

    ``metadata`` (JSON-able: class, config, ...) is stored beside the arrays; read it back with
    ``load_metadata``. A ``.safetensors`` path needs the ``safetensors`` package and a flat
    name -> array state dict.

    Raises:
        CheckpointError: values that cannot be stored without pickling (objects, strings arrays),
            reserved keys, or a .safetensors path without the package or with a nested state.
    """
    path = os.fspath(path)
    state, meta = _state_and_meta(obj, metadata)
    if path.endswith(".safetensors"):
        _atomic_write(path, _safetensors_bytes(state, meta))
        return
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(state, "", arrays)
    header = {"format": FORMAT, "version": VERSION, **meta, "tree": tree}
    try:
        header_text = json.dumps(header, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"metadata must be JSON-serialisable: {exc}") from None
    buffer = io.BytesIO()
    members: dict[str, Any] = {META_KEY: np.array(header_text), **arrays}  # numeric and unicode arrays: no pickles
    np.savez(buffer, **members)
    _atomic_write(path, buffer.getvalue())


def _read_npz(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of an npattn .npz checkpoint; never unpickles anything."""
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist")
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise CheckpointError(f"{path!r} is a single .npy array, not an npattn checkpoint (.npz)")
        with npz:
            if META_KEY not in npz.files:
                raise CheckpointError(
                    f"{path!r} is an .npz file but not an npattn checkpoint (no {META_KEY!r} entry; "
                    f"members: {', '.join(npz.files[:5])}{', ...' if len(npz.files) > 5 else ''})"
                )
            text = npz[META_KEY]
            if not isinstance(text, np.ndarray) or text.dtype.kind != "U" or text.shape != ():
                raise CheckpointError(f"{path!r}: the {META_KEY!r} entry is not the text an npattn checkpoint holds")
            header = json.loads(str(text[()]))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise CheckpointError(f"{path!r}: the {META_KEY!r} entry does not describe an npattn checkpoint")
            if header.get("version") != VERSION:
                raise CheckpointError(
                    f"{path!r} has checkpoint format version {header.get('version')!r}; "
                    f"this npattn reads version {VERSION}"
                )
            arrays = {name: npz[name] for name in npz.files if name != META_KEY}
            for name, arr in arrays.items():
                if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
                    raise CheckpointError(f"{path!r}: member {name!r} is not a numeric .npy array")
    except CheckpointError:
        raise
    except ValueError as exc:  # includes pickled content refused by allow_pickle=False
        if "pickle" in str(exc):
            raise CheckpointError(f"{path!r} contains pickled data; npattn never loads pickles ({exc})") from None
        raise CheckpointError(f"{path!r} is not a readable npattn checkpoint: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{path!r} is truncated, corrupt or not a checkpoint: {type(exc).__name__}: {exc}"
        ) from None
    return header, arrays


def load(path: str | os.PathLike[str]) -> Any:
    """Load what ``save`` wrote: the state dict (nested dicts, lists, tuples and arrays as saved).

    Raises:
        CheckpointError: the file is missing, truncated, random bytes, a foreign .npz/.npy, holds a
            pickled object (refused, never executed), or its members do not match its own index.
    """
    path = os.fspath(path)
    if path.endswith(".safetensors"):
        return _load_safetensors(path)[0]
    header, arrays = _read_npz(path)
    wanted: dict[str, np.ndarray] = {}
    _encode_names(header.get("tree"), wanted)
    missing = sorted(set(wanted) - set(arrays))
    extra = sorted(set(arrays) - set(wanted))
    if missing or extra:
        raise CheckpointError(f"{path!r}: members do not match the index (missing {missing}, unexpected {extra})")
    return _decode(header["tree"], arrays)


def _encode_names(node: Any, names: dict[str, Any]) -> None:
    """Collect the array member names a tree refers to."""
    if isinstance(node, dict):
        if isinstance(node.get("array"), str):
            names[node["array"]] = None
        for child in node.get("dict", []):
            if isinstance(child, list) and len(child) == 2:
                _encode_names(child[1], names)
        for key in ("list", "tuple"):
            for child in node.get(key, []):
                _encode_names(child, names)


def load_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata saved with a checkpoint: format, version, class, config and any extra keys."""
    path = os.fspath(path)
    if path.endswith(".safetensors"):
        return _load_safetensors(path)[1]
    header, _ = _read_npz(path)
    return {k: v for k, v in header.items() if k != "tree"}


# ----------------------------------------------------------------------------------------------
# safetensors (optional extra)


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError:
        raise CheckpointError(
            "a .safetensors path needs the safetensors package: pip install 'npattn[safetensors]' "
            "(or pip install safetensors), or save to a .npz path"
        ) from None
    return safetensors.numpy


def _safetensors_bytes(state: Mapping[str, Any], meta: dict[str, Any]) -> bytes:
    st = _safetensors_numpy()
    if not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()):
        raise CheckpointError(
            ".safetensors holds a flat name -> array state dict (a Module's); save nested state "
            "(an optimizer's, a training run's) to a .npz path"
        )
    # safetensors stores tensors sorted; the key order goes into the metadata to restore state_dict order
    text_meta = {"format": FORMAT, "version": str(VERSION), "npattn": json.dumps({**meta, "order": list(state)})}
    return bytes(st.save({k: np.ascontiguousarray(v) for k, v in state.items()}, metadata=text_meta))


def _load_safetensors(path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    st = _safetensors_numpy()
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist")
    with open(path, "rb") as f:
        data = f.read()
    try:
        state = dict(st.load(data))
        header_len = int.from_bytes(data[:8], "little")
        raw_meta = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    except Exception as exc:  # safetensors raises its own SafetensorError for any bad header
        raise CheckpointError(f"{path!r} is truncated, corrupt or not a safetensors file: {exc}") from None
    meta: dict[str, Any] = {"format": raw_meta.get("format"), "version": raw_meta.get("version")}
    try:
        meta.update(json.loads(raw_meta.get("npattn", "{}")))
    except json.JSONDecodeError:
        pass
    order = meta.pop("order", None)
    if isinstance(order, list) and sorted(order) == sorted(state):
        state = {key: state[key] for key in order}
    return state, meta
