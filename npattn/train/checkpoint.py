"""Checkpoints that lose nothing and run nothing: ``npattn.save(obj, path)`` / ``npattn.load(path)``.

Format (``.npz``, a zip of ``.npy`` arrays, never a pickle):

- every array of the state dict is one member, stored uncompressed, named by its path
  (``W_query``, ``optimizer/state/0/exp_avg``, ...) when the keys are plain names, else ``@<n>``;
- the member ``__npattn__`` holds one JSON string: ``{"format": "npattn-checkpoint", "version": 1,
  "class": ..., "config": {...}, "tree": ...}``. ``tree`` records the nesting (dicts with their key
  types, lists, tuples), the plain values (ints, floats, bools, strings, None) and, for arrays, the
  member that holds them, so a nested state dict (an optimizer's, a training run's) comes back
  exactly as it was saved.

Saving checks the index (``npattn.train.checkpoint_index``) with the same function loading uses
before anything is written, so ``save`` never writes a file that ``load`` refuses. Loading never
unpickles (``allow_pickle=False``) and is bounded by the file's size: from the zip directory and
each member's ``.npy`` header, before any array is read, it refuses compressed members (a zip
bomb), members that overlap or declare more bytes than the file holds (a huge shape), repeated
names, and anything the index does not list.
Writing is atomic (``npattn.train.atomic``): a temporary file in the target's folder, flushed,
fsync'ed and renamed over the target, so a crash leaves the previous checkpoint or the new one.

A path ending in ``.safetensors`` uses the safetensors format instead (the optional extra
``safetensors``; ``npattn.train.safetensors_io``): a flat name -> array state dict, readable by
``safetensors.torch.load_file``.
"""

from __future__ import annotations

import io
import json
import numbers
import os
import re
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError, ConfigError
from npattn.train.atomic import atomic_write, check_checkpoint_target, check_source, sigint_held
from npattn.train.checkpoint_index import (
    FORMAT,
    META_KEY,
    RESERVED,
    VERSION,
    check_index_sha256,
    check_json,
    decode_tree,
    encode_tree,
    index_sha256,
    parse_header,
    record_crc32,
    recorded_crc32,
)
from npattn.train.module_config import constructor_config
from npattn.train.npz_reader import Npz
from npattn.train.saveguard import SaveGuard

__all__ = ["FORMAT", "VERSION", "load", "load_metadata", "save", "save_run"]

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
                f"metadata keys {reserved} are reserved for the checkpoint's own index in both formats (format, "
                "version, tree, order, index_sha256, and the class and config of what was saved); rename them"
            )
        meta.update(metadata)
    check_json(meta, "metadata", finite=True)
    return state, meta


def save(
    obj: Any,
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, Any] | None = None,
    pickle_module: Any = None,
    pickle_protocol: Any = 2,
    _use_new_zipfile_serialization: Any = True,
) -> None:
    """Save a state dict (or a Module's / Optimizer's) to ``path``, atomically.

    ``pickle_module``, ``pickle_protocol`` and ``_use_new_zipfile_serialization`` are
    ``torch.save``'s keywords, accepted where they change nothing (npattn never pickles and writes
    one format): ``pickle_module`` None or the ``pickle`` module, any integer protocol, True.

    ``metadata`` (JSON: class, config, ...) is stored beside the arrays; read it back with
    ``load_metadata``. A ``.safetensors`` path needs the ``safetensors`` package and a flat
    name -> array state dict. Everything is checked before the target is touched: what ``save``
    writes, ``load`` reads back exactly.

    Raises:
        CheckpointError: values that cannot be stored without pickling (objects, string arrays),
            a state that contains itself or nests deeper than 64 levels, metadata that is not JSON
            or sets a reserved key (format, version, tree, order, index_sha256, class, config), a
            .safetensors path without the package or with a nested state, or a target that is a
            directory, a device or a FIFO, is not writable, or whose folder does not exist (see
            ``npattn.train.atomic``).
        ConfigError: ``pickle_module`` other than ``pickle``, a protocol that is not an integer, or
            ``_use_new_zipfile_serialization=False``.
    """
    if pickle_module is not None and getattr(pickle_module, "__name__", None) != "pickle":
        raise ConfigError(
            f"pickle_module={_module_name(pickle_module)} is not supported: npattn never pickles (a checkpoint holds "
            "arrays, numbers and strings); leave it out"
        )
    if isinstance(pickle_protocol, bool) or not isinstance(pickle_protocol, numbers.Integral):
        raise ConfigError(
            f"pickle_protocol must be an integer (npattn never pickles: it is ignored), got {pickle_protocol!r:.60}"
        )
    if _use_new_zipfile_serialization is not True:
        raise ConfigError(
            f"_use_new_zipfile_serialization={_use_new_zipfile_serialization!r:.60} is not supported: npattn "
            "writes one format (a .npz zip, or .safetensors by the path's extension); leave it out"
        )
    with sigint_held():  # Ctrl-C while the zip is written would leave a half-written ZipFile
        _save(obj, path, metadata)


def _module_name(value: Any) -> str:
    return str(getattr(value, "__name__", None) or f"{value!r:.60}")


def save_run(
    state: Mapping[str, Any],
    path: str | os.PathLike[str],
    model_class: str,
    config: dict[str, Any],
    guard: SaveGuard | None = None,
) -> os.stat_result:
    """``save`` of a training run's state, recording the class and config of the model it trains
    (the index entries that ``save``'s metadata may not set); returns the written file's stat.
    ``guard``: the run's ``SaveGuard`` (a path someone else changed since the run's last write is
    refused with a CheckpointError and left as it is)."""
    with sigint_held():
        return _save(state, path, None, {"class": model_class, "config": config}, guard)


def _save(
    obj: Any,
    path: Any,
    metadata: Mapping[str, Any] | None,
    own: Mapping[str, Any] | None = None,
    guard: SaveGuard | None = None,
) -> os.stat_result:
    if guard is not None:
        guard.check()  # first: a file someone put there since is named as such, read-only or not
    _, safetensors = check_checkpoint_target(path, own=guard is not None and guard.holds_own_write())
    state, meta = _state_and_meta(obj, metadata, own)
    if safetensors:
        from npattn.train.safetensors_io import safetensors_bytes

        return atomic_write(path, safetensors_bytes(state, meta), guard=guard)
    arrays: dict[str, np.ndarray] = {}
    tree = encode_tree(state, [], arrays, set())
    # the index records each member's CRC-32 (the one the zip directory will hold), binding its contents to its name
    record_crc32(tree, {name: _npy_crc32(arr) for name, arr in arrays.items()})
    index = {"format": FORMAT, "version": VERSION, **meta, "tree": tree}
    header_text = json.dumps({**index, "index_sha256": index_sha256(index)})
    parse_header(header_text)  # the loader's own check: a file load refuses is never written
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:  # what np.savez writes
        for name, arr in {META_KEY: np.array(header_text), **arrays}.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arr, allow_pickle=False)
    return atomic_write(path, buffer.getvalue(), guard=guard)


class _Crc32:
    """A write-only file that keeps the CRC-32 of what is written to it (no copy is kept)."""

    crc = 0

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        return len(data)


def _npy_crc32(arr: np.ndarray) -> int:
    """The CRC-32 of ``arr`` as an .npy member, streamed in the chunks ``write_array`` writes."""
    sink = _Crc32()
    np.lib.format.write_array(sink, arr, allow_pickle=False)
    return sink.crc


# ----------------------------------------------------------------------------------------------
# load: bounded by the file's size, checked from the zip directory and the .npy headers first


def _open_npz(path: str, read_arrays: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and (if ``read_arrays``) the arrays of an npattn .npz; never unpickles anything."""
    try:
        npz = Npz(path)
        with npz.zip:
            header, names = npz.header()
            arrays = {}
            scalars = set(_scalar_names(header["tree"]))
            crcs = recorded_crc32(header["tree"])  # none in a file written before they were recorded
            for name in names:
                shape, _ = npz.check(name)
                if name in crcs and npz.infos[name].CRC != crcs[name]:
                    raise CheckpointError(
                        f"{path!r}: member {name!r} holds other contents than the index records for it (CRC-32 "
                        f"{npz.infos[name].CRC:#010x} in the zip directory, expected {crcs[name]:#010x}): members "
                        "swapped or replaced after the file was written; save the object again"
                    )
                if name in scalars and shape != ():
                    raise CheckpointError(f"{path!r}: the index marks member {name!r} of shape {shape} as a scalar")
                if read_arrays:
                    arrays[name] = npz.read(name)
            check_index_sha256(header, path)  # after the members: a specific problem is named first
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


def _torch_keywords(map_location: Any, weights_only: Any, mmap: Any) -> None:
    """``torch.load``'s keywords, accepted where they change nothing: arrays always load into CPU
    memory, read from the file (never mapped), and npattn never unpickles (so ``weights_only=True``
    is what it always does)."""
    if mmap is not None and not (isinstance(mmap, (bool, np.bool_, int, np.integer)) and not mmap):  # False, 0
        raise ConfigError(
            f"mmap={mmap!r:.60} is not supported: npattn reads a checkpoint's arrays into memory, checking them as it "
            "reads them; leave it out or pass False"
        )
    if map_location is not None:
        text = map_location if isinstance(map_location, str) else None
        if type(map_location).__module__ == "torch" and type(map_location).__name__ == "device":
            text = str(map_location)
        if text is None or not re.fullmatch(r"cpu(:0)?", text):
            why = (
                "npattn runs on the CPU (arrays always load into CPU memory)"
                if text is not None
                else "npattn loads NumPy arrays into CPU memory and has no storages to remap"
            )
            raise ConfigError(
                f"map_location={map_location!r:.60} is not supported: {why}; expected None, 'cpu' or "
                "torch.device('cpu') (move the arrays yourself after loading, e.g. torch.from_numpy(a).to('cuda'))"
            )
    if weights_only is not None and not (isinstance(weights_only, (bool, np.bool_)) and weights_only):
        why = (
            "npattn never unpickles, so there is nothing to allow (a checkpoint holds arrays, numbers and strings)"
            if isinstance(weights_only, (bool, np.bool_))
            else f"expected True or None, got {type(weights_only).__name__}"
        )
        raise ConfigError(f"weights_only={weights_only!r:.60} is not supported: {why}; leave it out or pass True")


def load(
    path: str | os.PathLike[str],
    *,
    map_location: Any = None,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    pickle_module: Any = None,
    encoding: str | None = None,
) -> Any:
    """Load what ``save`` wrote: the state dict (nested dicts, lists, tuples and arrays as saved).

    ``map_location``, ``weights_only``, ``mmap``, ``pickle_module`` and ``encoding`` are
    ``torch.load``'s keywords, accepted where they change nothing: ``map_location`` None, ``'cpu'``
    or ``torch.device('cpu')``; ``weights_only`` None or True (npattn never unpickles); ``mmap`` None
    or False (the arrays are read into memory); ``pickle_module`` None or ``pickle`` and any
    ``encoding`` string (both only matter to unpickling).

    Raises:
        CheckpointError: the file is missing, not a regular file, truncated, random bytes, a foreign
            .npz/.npy, holds a pickled object (refused, never executed), has compressed, repeated,
            overlapping or oversized members, or its members do not match its own index.
        ConfigError: ``map_location`` other than the CPU (``'cuda'``, a callable, a dict),
            ``weights_only=False`` (there is no unpickling to allow), or ``mmap=True``.
    """
    _torch_keywords(map_location, weights_only, mmap)
    if pickle_module is not None and getattr(pickle_module, "__name__", None) != "pickle":
        name = _module_name(pickle_module)
        raise ConfigError(f"pickle_module={name} is not supported: npattn never unpickles; leave it out")
    if encoding is not None and not isinstance(encoding, str):
        raise ConfigError(f"encoding must be a string (it only matters to unpickling), got {encoding!r:.60}")
    source = check_source(path)
    if source.lower().endswith(".safetensors"):
        from npattn.train.safetensors_io import load_safetensors

        return load_safetensors(source)[0]
    header, arrays = _open_npz(source, read_arrays=True)
    return decode_tree(header["tree"], arrays)


def _scalar_names(node: Any) -> list[str]:
    if "array" in node:
        return [node["array"]] if node["scalar"] else []
    if "dict" in node:
        return [n for _, item in node["dict"] for n in _scalar_names(item)]
    if "list" in node or "tuple" in node:
        return [n for item in node.get("list", node.get("tuple")) for n in _scalar_names(item)]
    return []


def load_metadata(
    path: str | os.PathLike[str],
    *,
    map_location: Any = None,
    weights_only: bool | None = None,
    mmap: bool | None = None,
) -> dict[str, Any]:
    """The metadata saved with a checkpoint: format, version, class, config and any extra keys.

    The whole file is checked as ``load`` checks it, except that no array is read; ``map_location``,
    ``weights_only`` and ``mmap`` are accepted and refused as by ``load``.
    """
    _torch_keywords(map_location, weights_only, mmap)
    source = check_source(path)
    if source.lower().endswith(".safetensors"):
        from npattn.train.safetensors_io import load_safetensors

        return load_safetensors(source)[1]
    header, _ = _open_npz(source, read_arrays=False)
    return {k: v for k, v in header.items() if k not in ("tree", "index_sha256")}
