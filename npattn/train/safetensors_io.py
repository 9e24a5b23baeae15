"""The ``.safetensors`` side of checkpoints (the optional extra ``safetensors``): a flat name -> array
state dict that ``safetensors.torch.load_file`` reads, with npattn's metadata (class, config, the key
order and their ``index_sha256``, as in an .npz index) as JSON in the file's ``__metadata__``. Saving
refuses names and dtypes the format cannot hold before anything is written; loading checks the
header's length against the file's size and runs the .npz index's own check on npattn's metadata,
refusing a hand edit (its digest no longer matches). The digest also covers the tensor table
(names, dtypes, shapes, data_offsets: its SHA-256 is ``__metadata__["tensors_sha256"]``); a file
without that entry (written before) is checked on its metadata only, and metadata without a digest
(written by an npattn before it was recorded) loads unchecked. A file written by another program
(PyTorch's ``save_file``) loads as it is. Since then the digest also covers each tensor's data bytes
(``__metadata__["data_sha256"]``: a JSON object of one SHA-256 per tensor, hashed in place), so a
changed data byte is refused naming the tensor; a file without it (written before) loads unchecked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn._checks import repeated_keys
from npattn.errors import CheckpointError
from npattn.train.atomic import read_bytes
from npattn.train.checkpoint_index import (
    FORMAT,
    VERSION,
    check_index_sha256,
    check_meta,
    index_edited,
    index_sha256,
    json_problem,
    unmasked,
)

__all__ = ["load_safetensors", "safetensors_bytes"]


_SAFETENSORS_KINDS = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}
_HEADER_DTYPES = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "U32": 4, "I32": 4, "U64": 8, "I64": 8}
_HEADER_DTYPES.update({"F16": 2, "F32": 4, "F64": 8})  # header dtype -> bytes per element
_KINDS_TEXT = "bool, int, uint and float16/32/64 only"


def _storable(dtype: np.dtype) -> bool:
    """The one rule saving and loading share: the dtypes a .safetensors checkpoint may hold."""
    return dtype.itemsize in _SAFETENSORS_KINDS.get(dtype.kind, ())


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError:
        raise CheckpointError(
            "a .safetensors path needs the safetensors package: pip install 'npattn[safetensors]' "
            "(or pip install safetensors), or save to a .npz path"
        ) from None
    return safetensors.numpy


def safetensors_bytes(state: Mapping[str, Any], meta: dict[str, Any]) -> bytes:
    st = _safetensors_numpy()
    state = {key: unmasked(value, f"{key!r}") for key, value in state.items()}
    for key, value in state.items():
        if isinstance(value, (Mapping, list, tuple)) or not isinstance(key, str):
            raise CheckpointError(
                ".safetensors holds a flat name -> array state dict (a Module's); save nested state "
                f"(an optimizer's, a training run's) to a .npz path (got {key!r}: {type(value).__name__})"
            )
        if not isinstance(value, np.ndarray):
            raise CheckpointError(
                f"cannot save {key!r} to .safetensors: it is of type {type(value).__name__}, not a NumPy array "
                "(a torch tensor becomes one with .numpy(), a bfloat16 one after .float(): NumPy has no "
                "bfloat16; a .npz path also holds numbers)"
            )
    tensors = {}
    for key, value in state.items():
        if key == "__metadata__" or not key or not _utf8(key):
            raise CheckpointError(f"cannot save the name {key!r} to .safetensors (reserved, empty or not UTF-8)")
        if not _storable(value.dtype):
            raise CheckpointError(f"cannot save {key!r} to .safetensors: dtype {value.dtype} ({_KINDS_TEXT})")
        tensors[key] = np.array(value, dtype=value.dtype.newbyteorder("<"), order="C")
    # safetensors stores tensors sorted; the key order goes into the metadata to restore state_dict order
    extra = {**meta, "order": list(state)}
    plain = st.save(tensors)
    table = _tensor_table(plain)  # where the library puts each tensor (metadata moves none)
    table_sha = _sha256(table)
    data_sha = json.dumps(_data_digests(plain, table), sort_keys=True)
    index_digest = index_sha256({"format": FORMAT, "version": VERSION, **extra})
    extra["index_sha256"] = _with_table(index_digest, table_sha, data_sha)
    check_meta(extra)  # the loader's own check: a file load refuses is never written
    text_meta = {"format": FORMAT, "version": str(VERSION), "npattn": json.dumps(extra), TABLE_KEY: table_sha}
    text_meta[DATA_KEY] = data_sha
    del plain
    data = bytes(st.save(tensors, metadata=text_meta))
    if _tensor_table(data) != table:
        raise CheckpointError("the safetensors library placed the tensors differently with metadata; nothing written")
    return data


TABLE_KEY = "tensors_sha256"  # beside 'npattn' in __metadata__: the digest of the tensor table
DATA_KEY = "data_sha256"  # beside it: JSON {tensor name: SHA-256 of its data bytes}


def _data_digests(data: bytes, table: dict[str, Any]) -> dict[str, str]:
    """The SHA-256 of each tensor's bytes in the file ``data``, read in place (no copy of the data)."""
    body = memoryview(data)[8 + int.from_bytes(data[:8], "little") :]
    spans = {name: entry["data_offsets"] for name, entry in table.items()}
    return {name: hashlib.sha256(body[start:end]).hexdigest() for name, (start, end) in spans.items()}


def _tensor_table(data: bytes) -> dict[str, Any]:
    """The header's tensor table (name -> dtype, shape, data_offsets), without ``__metadata__``."""
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    return {name: entry for name, entry in header.items() if name != "__metadata__"}


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


def _with_table(index_digest: str, table_sha: str, data_sha: str | None = None) -> str:
    """The ``index_sha256`` of a file that records its tensor table's digest (and, since, its data
    digests): it covers them all, so an edit of a tensor's name, dtype, shape or offsets, or removing
    a digest, is told. A file written before the data digests has none (``data_sha`` None)."""
    return _sha256([index_digest, table_sha] if data_sha is None else [index_digest, table_sha, data_sha])


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_extent(path: str, name: str, entry: Any, body: int) -> None:
    """A well-formed header entry's byte range lies in the file's ``body`` bytes and holds exactly
    its shape times its dtype's size (the library's own message does not name the tensor)."""
    if name == "__metadata__" or not isinstance(entry, dict) or entry.get("dtype") not in _HEADER_DTYPES:
        return
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and isinstance(offsets, list) and len(offsets) == 2):
        return  # malformed: the library refuses it with its own message
    if not all(type(v) is int for v in [*shape, *offsets]):
        return
    fields = (("shape", shape), ("data_offsets", offsets))
    negative = [f"{what} {values}" for what, values in fields if min(values, default=0) < 0]
    if negative:
        raise CheckpointError(
            f"{path!r}: tensor {name!r} has a negative {' and a negative '.join(negative)}; sizes and offsets are >= 0 "
            "(the file is corrupt or its header edited)"
        )
    start, end = offsets
    size = _HEADER_DTYPES[entry["dtype"]] * int(np.prod(shape, dtype=object))
    if not start <= end <= body:
        raise CheckpointError(
            f"{path!r}: tensor {name!r} has data_offsets [{start}, {end}]; expected 0 <= start <= end <= {body}, "
            "the bytes after the header (the file is truncated or its header edited)"
        )
    if end - start != size:
        raise CheckpointError(
            f"{path!r}: tensor {name!r} has {end - start} bytes of data; its shape {tuple(shape)} and dtype "
            f"{entry['dtype']} need {size} (the file is corrupt or its header edited)"
        )


def _refuse_repeated_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of the header; a name given twice is refused (JSON would keep the last)."""
    repeated = repeated_keys(pairs)
    if repeated:
        names = "the key(s)" if "__metadata__" in repeated else "the tensor(s)"
        raise CheckpointError(f"the safetensors header names {names} {repeated} more than once")
    return dict(pairs)


def load_safetensors(path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    data = read_bytes(path)
    bad = f"{path!r} is truncated, corrupt or not a safetensors file"
    header_len = int.from_bytes(data[:8], "little")
    if len(data) < 8 or header_len > len(data) - 8:
        zipped = " (it starts like a zip file: an .npz saved under a .safetensors name?)" if data[:2] == b"PK" else ""
        raise CheckpointError(f"{bad}: its header declares {header_len} bytes in a file of {len(data)}{zipped}")
    if header_len == 0:
        raise CheckpointError(f"{bad}: its header is empty (its length, the first 8 bytes, is 0)")
    try:
        raw = json.loads(data[8 : 8 + header_len], object_pairs_hook=_refuse_repeated_names)
    except CheckpointError as exc:
        raise CheckpointError(f"{path!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{bad}: its header is not JSON ({json_problem(exc)})") from None
    for name, entry in raw.items() if isinstance(raw, dict) else ():
        dtype = entry.get("dtype") if isinstance(entry, dict) and name != "__metadata__" else None
        if isinstance(dtype, str) and dtype not in _HEADER_DTYPES:  # a file save would refuse to write
            hint = "; convert it with tensor.float() before saving" if dtype == "BF16" else ""
            raise CheckpointError(
                f"{path!r}: tensor {name!r} has dtype {dtype}, which npattn neither saves nor loads "
                f"({_KINDS_TEXT}){hint}"
            )
        _check_extent(path, name, entry, len(data) - 8 - header_len)
    entries = [e for n, e in (raw.items() if isinstance(raw, dict) else ()) if n != "__metadata__"]
    offsets = [e.get("data_offsets") if isinstance(e, dict) else None for e in entries]
    well_formed = all(isinstance(o, list) and len(o) == 2 and all(type(v) is int for v in o) for o in offsets)
    ends = [o[1] for o in offsets if o is not None] if well_formed else []  # else the library names the fault
    if isinstance(raw, dict) and well_formed and max(ends, default=0) < len(data) - 8 - header_len:
        extra = len(data) - 8 - header_len - max(ends, default=0)
        raise CheckpointError(
            f"{path!r} has {extra} byte(s) after the data its header describes (bytes appended to the file, "
            "or a header edited): a safetensors file ends with its last tensor"
        )
    st = _safetensors_numpy()
    try:
        state = dict(st.load(data))
    except Exception as exc:  # safetensors raises its own SafetensorError for any bad header
        raise CheckpointError(f"{bad}: {exc}") from None
    for name, value in state.items():
        if not _storable(value.dtype):
            raise CheckpointError(f"{path!r}: tensor {name!r} has dtype {value.dtype}, which npattn does not load")
    raw_meta = raw.get("__metadata__") or {} if isinstance(raw, dict) else {}
    meta: dict[str, Any] = {"format": raw_meta.get("format"), "version": raw_meta.get("version")}
    if raw_meta.get("format") == FORMAT or "npattn" in raw_meta:
        try:
            extra = json.loads(raw_meta.get("npattn", "{}"))
            if not isinstance(extra, dict):
                raise ValueError(f"expected an object, got {type(extra).__name__}")
            own = sorted(set(extra) & {"format", "version", "tree"})
            if own:
                raise ValueError(f"it sets {own}, which npattn keeps outside it")
            check_meta(extra)
        except (ValueError, RecursionError, CheckpointError) as exc:
            raise CheckpointError(
                f"{path!r}: its 'npattn' metadata is not the JSON object npattn writes ({exc})"
            ) from None
        if raw_meta.get("version") != str(VERSION):
            raise CheckpointError(
                f"{path!r} has checkpoint format version {raw_meta.get('version')!r}; "
                f"this npattn reads version {VERSION}"
            )
        if TABLE_KEY in raw_meta:  # written since the digest covers the tensor table
            _check_table(path, extra, raw_meta[TABLE_KEY], raw, raw_meta.get(DATA_KEY))
            if DATA_KEY in raw_meta:  # written since it also covers each tensor's data bytes
                _check_data(path, data, raw_meta[DATA_KEY])
        elif "index_sha256" in extra:  # older files: the digest covers the metadata only
            check_index_sha256({"format": FORMAT, "version": VERSION, **extra}, path)
        extra.pop("index_sha256", None)  # a file written before the digest was recorded loads unchecked
        order = extra.pop("order", list(state))
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(state):
            raise CheckpointError(f"{path!r}: its 'npattn' metadata lists other tensors than the file holds")
        state = {key: state[key] for key in order}
        meta = {**meta, "version": VERSION, **extra}
    elif isinstance(raw_meta, dict):  # another writer's metadata, every entry as written (it dropped all but two)
        meta = {**meta, **raw_meta}
    return state, meta


def _check_table(path: str, extra: dict[str, Any], table_sha: Any, raw: dict[str, Any], data_sha: Any) -> None:
    """Refuse a file whose tensor table (names, dtypes, shapes, data_offsets), metadata or data
    digests no longer match the digests written with it."""
    table = {name: entry for name, entry in raw.items() if name != "__metadata__"}
    index = {"format": FORMAT, "version": VERSION, **extra}
    if not isinstance(table_sha, str) or "index_sha256" not in extra:
        check_index_sha256(index, path)  # no digest: refused with its message
    data_text = None if data_sha is None else str(data_sha)
    if extra["index_sha256"] != _with_table(index_sha256(index), str(table_sha), data_text):
        raise index_edited(path)
    if table_sha != _sha256(table):
        raise CheckpointError(
            f"{path!r}: its tensor table (names, dtypes, shapes, data_offsets) was edited after it was written "
            f"(it no longer matches its '{TABLE_KEY}'); save the object again instead of editing the file"
        )


def _check_data(path: str, data: bytes, data_sha: str) -> None:
    """Refuse a tensor whose data bytes no longer match the SHA-256 written with them (the table,
    and so each tensor's offsets, is already checked)."""
    try:
        expected = json.loads(data_sha)
    except (TypeError, ValueError, RecursionError):
        expected = None
    table = _tensor_table(data)
    if not isinstance(expected, dict) or sorted(expected) != sorted(table):
        raise CheckpointError(f"{path!r}: its '{DATA_KEY}' does not list one digest per tensor (the file is corrupt)")
    for name, actual in _data_digests(data, table).items():
        if actual != expected[name]:
            raise CheckpointError(
                f"{path!r}: the data of tensor {name!r} no longer matches its SHA-256 in '{DATA_KEY}' (expected "
                f"{str(expected[name])[:12]}..., got {actual[:12]}...): the file was corrupted after it was "
                "written (a changed byte on disk or in transfer); restore it from a good copy or save it again"
            )
