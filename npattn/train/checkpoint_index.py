"""The index of an npattn checkpoint: the JSON tree that describes a nested state, and its checks.

``encode_tree`` turns a nested state (dicts with str or int keys, lists, tuples, arrays, plain
numbers, strings, None) into a JSON-able tree plus ``{member name: array}``; ``decode_tree`` turns
them back. ``check_header`` is the one check of the index that both ``save`` (before anything is
written) and ``load`` (before any array is read) run, so ``save`` never writes a file ``load``
refuses.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError

FORMAT = "npattn-checkpoint"
VERSION = 1
META_KEY = "__npattn__"
# index keys that metadata cannot set, in both formats ("order" is the key order of a .safetensors file)
RESERVED = ("format", "version", "tree", "class", "config", "index_sha256", "order")
MAX_DEPTH = 64  # nesting of dicts/lists/tuples a checkpoint may hold
SCALARS = (bool, int, float, str, type(None))
MAX_INT_DIGITS = 4000  # below Python's default limit on int <-> str conversion (4300 digits)
MAX_INT_BITS = int(MAX_INT_DIGITS / math.log10(2))
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


# ----------------------------------------------------------------------------------------------
# The tree: nested state -> (JSON-able description, {member name: array}) and back.


def member_name(keys: list[Any], arrays: Mapping[str, np.ndarray]) -> str:
    """The path of plain keys (``optimizer/state/0/exp_avg``), or ``@<n>`` when that would not be safe."""
    parts = [str(k) for k in keys]
    name = "/".join(parts)
    plain = all(PLAIN_NAME.fullmatch(part) and part not in (".", "..") for part in parts)
    if not plain or not parts or name == META_KEY or name.endswith(".npy") or len(name) > 1000 or name in arrays:
        name = f"@{len(arrays)}"
    return name


def where(keys: list[Any]) -> str:
    return "state" + "".join(f"[{k!r}]" for k in keys)


def check_digits(value: Any, where: str) -> None:
    """JSON writes an int in decimal, and Python refuses to read back more than 4300 digits."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        digits = int(value.bit_length() * math.log10(2)) + 1
        raise CheckpointError(
            f"cannot save {where}: an integer of about {digits} digits (at most {MAX_INT_DIGITS} digits can be "
            "read back; store it as a string)"
        )


def unmasked(value: Any, what: str) -> Any:
    """A masked array with nothing masked as its data (what npattn computes with); one with masked
    entries is refused (its mask would be lost). Anything else unchanged.

    Raises:
        CheckpointError: naming ``what`` and how many entries are masked.
    """
    if not isinstance(value, np.ma.MaskedArray):
        return value
    count = int(np.ma.count_masked(value))
    if count:
        raise CheckpointError(
            f"cannot save {what}: a masked array with {count} of {value.size} entries masked (its mask would be "
            "lost); save .filled(value), or .data and .mask"
        )
    return value.data


def encode_tree(value: Any, keys: list[Any], arrays: dict[str, np.ndarray], active: set[int]) -> Any:
    if len(keys) > MAX_DEPTH:
        raise CheckpointError(f"cannot save {where(keys[:3])}...: nested deeper than {MAX_DEPTH} levels")
    value = unmasked(value, where(keys))
    if isinstance(value, np.str_):  # a str (np.str_ subclasses it): saved, and loaded, as a plain str
        value = str(value)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot save {where(keys)}: dtype {arr.dtype} (only bool, int and float arrays)")
        name = member_name(keys, arrays)
        arrays[name] = arr
        return {"array": name, "scalar": isinstance(value, np.generic)}
    if isinstance(value, SCALARS):
        check_digits(value, where(keys))
        return {"value": value}
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in active:
            raise CheckpointError(f"cannot save {where(keys)}: it contains itself")
        active.add(id(value))
        try:
            if isinstance(value, Mapping):
                items = []
                for key, item in value.items():
                    if isinstance(key, bool) or not isinstance(key, (str, int)):
                        raise CheckpointError(f"cannot save {where(keys)}: keys must be str or int, got {key!r}")
                    check_digits(key, f"a key of {where(keys)}")
                    items.append([key, encode_tree(item, [*keys, key], arrays, active)])
                return {"dict": items}
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {kind: [encode_tree(item, [*keys, i], arrays, active) for i, item in enumerate(value)]}
        finally:
            active.discard(id(value))
    hint = ""
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "numpy"):
        hint = "; a torch tensor is saved as its array: tensor.detach().cpu().numpy()"
        if "bfloat16" in str(getattr(value, "dtype", "")):
            hint += " after tensor.float() (NumPy has no bfloat16)"
    raise CheckpointError(
        f"cannot save {where(keys)} of type {type(value).__name__}: checkpoints hold arrays, numbers, "
        f"strings, None, and dicts/lists/tuples of them (never pickled objects){hint}"
    )


def check_tree(node: Any, names: list[str], depth: int = 0) -> None:
    """Raise CheckpointError unless ``node`` is a tree ``encode_tree`` writes; collect its member names."""
    if depth > MAX_DEPTH + 1:
        raise CheckpointError(f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict) or len(node) not in (1, 2, 3):
        raise CheckpointError(f"corrupt tree entry {node!r:.80}")
    if "array" in node:
        if (
            set(node) - {"crc32"} != {"array", "scalar"}
            or not isinstance(node["array"], str)
            or not isinstance(node["scalar"], bool)
            or not (type(node.get("crc32", 0)) is int and 0 <= node.get("crc32", 0) < 1 << 32)
        ):
            raise CheckpointError(f"corrupt tree entry {node!r:.80}")
        names.append(node["array"])
    elif "value" in node:
        if len(node) != 1 or not isinstance(node["value"], SCALARS):
            raise CheckpointError(f"corrupt tree entry {node!r:.80}")
    elif "dict" in node and len(node) == 1 and isinstance(node["dict"], list):
        for entry in node["dict"]:
            key_ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], (str, int))
            if not key_ok or isinstance(entry[0], bool):
                raise CheckpointError(f"corrupt dict entry {entry!r:.80} (expected [key, value])")
            check_tree(entry[1], names, depth + 1)
        keys = [entry[0] for entry in node["dict"]]
        if len(set(map(repr, keys))) != len(keys):
            raise CheckpointError("a dict lists the same key twice")
    elif len(node) == 1 and isinstance(items := node.get("list", node.get("tuple")), list):
        for item in items:
            check_tree(item, names, depth + 1)
    else:
        raise CheckpointError(f"corrupt tree entry {node!r:.80}")
    if "crc32" in node and "array" not in node:
        raise CheckpointError(f"corrupt tree entry {node!r:.80}")


def array_nodes(node: Any) -> list[dict[str, Any]]:
    """The tree's ``{"array": member, ...}`` entries, in order."""
    if "array" in node:
        return [node]
    if "dict" in node:
        return [found for _, item in node["dict"] for found in array_nodes(item)]
    if "list" in node or "tuple" in node:
        return [found for item in node.get("list", node.get("tuple")) for found in array_nodes(item)]
    return []


def record_crc32(tree: Any, crcs: Mapping[str, int]) -> None:
    """Write each member's CRC-32 (the zip's own, known once it is written) into its tree entry, so
    the index (and its ``index_sha256``) binds each member's contents to its name."""
    for node in array_nodes(tree):
        node["crc32"] = crcs[node["array"]]


def recorded_crc32(tree: Any) -> dict[str, int]:
    """``{member: CRC-32}`` from the tree; empty for a file written before they were recorded."""
    return {node["array"]: node["crc32"] for node in array_nodes(tree) if "crc32" in node}


def decode_tree(node: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """The state ``encode_tree`` described (``node`` already passed ``check_tree``)."""
    if "array" in node:
        arr = arrays[node["array"]]
        return arr[()] if node["scalar"] else arr
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {key: decode_tree(item, arrays) for key, item in node["dict"]}
    if "list" in node:
        return [decode_tree(item, arrays) for item in node["list"]]
    return tuple(decode_tree(item, arrays) for item in node["tuple"])


# ----------------------------------------------------------------------------------------------
# The index (header): the one check that both save and load run.


def check_json(value: Any, where: str, depth: int = 0, finite: bool = False) -> None:
    """Metadata must come back as it was: dicts with str keys, lists, str, int, float, bool, None;
    ``finite`` (saving): no NaN or infinity either, which standard JSON cannot hold (Python would
    write ``NaN``/``Infinity``, which other JSON readers refuse; files that hold them still load)."""
    if depth > MAX_DEPTH:
        raise CheckpointError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CheckpointError(f"metadata keys must be str (JSON object keys), got {key!r} in {where}")
            check_json(item, f"{where}[{key!r}]", depth + 1, finite)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]", depth + 1, finite)
    elif isinstance(value, SCALARS):
        if finite and isinstance(value, float) and not math.isfinite(value):
            raise CheckpointError(
                f"{where} is {float(value)!r}: metadata is standard JSON, which has no NaN or infinity; expected "
                "a finite number (or None, or a string such as 'nan')"
            )
        check_digits(value, where)
    else:
        hint = " (use a list)" if isinstance(value, tuple) else ""
        raise CheckpointError(
            f"{where} is a {type(value).__name__}{hint}: metadata is JSON, so it holds dicts with "
            "str keys, lists, strings, numbers, booleans and None"
        )


def check_meta(meta: dict[str, Any]) -> None:
    """The one check of the index's own entries that both formats run (the .npz index, the JSON in a
    .safetensors file's metadata): 'class' a string or null, 'config' an object, 'index_sha256' and
    'order' (a .safetensors file's key order) of their types, and everything JSON."""
    if not (meta.get("class") is None or isinstance(meta.get("class"), str)):
        raise CheckpointError(f"the index's 'class' must be a string or null, got {meta.get('class')!r:.60}")
    if not isinstance(meta.get("config", {}), dict):
        raise CheckpointError(f"the index's 'config' must be an object, got {meta.get('config')!r:.60}")
    if not isinstance(meta.get("index_sha256", ""), str):
        raise CheckpointError(f"the index's 'index_sha256' must be a string, got {meta.get('index_sha256')!r:.60}")
    order = meta.get("order", [])
    if not (isinstance(order, list) and all(isinstance(name, str) for name in order)):
        raise CheckpointError(f"the index's 'order' must be a list of tensor names, got {order!r:.60}")
    check_json(meta, "index")


def check_header(header: Any) -> list[str]:
    """Raise CheckpointError unless ``header`` is a valid index; return the member names its tree uses."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"the {META_KEY!r} entry does not describe an npattn checkpoint")
    version = header.get("version")
    if type(version) is not int or version != VERSION:
        raise CheckpointError(f"has checkpoint format version {version!r}; this npattn reads version {VERSION}")
    if "tree" not in header:
        raise CheckpointError(f"the {META_KEY!r} entry has no 'tree' (the nesting of the state)")
    check_meta({k: v for k, v in header.items() if k != "tree"})
    names: list[str] = []
    check_tree(header["tree"], names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CheckpointError(f"the index names the member(s) {repeated} more than once")
    return names


def index_sha256(header: dict[str, Any]) -> str:
    """SHA-256 of the index (class, config, tree, metadata) without its own ``index_sha256``."""
    index = {k: v for k, v in header.items() if k != "index_sha256"}
    return hashlib.sha256(json.dumps(index, sort_keys=True).encode("utf-8")).hexdigest()


def json_problem(exc: BaseException) -> str:
    """Why JSON text could not be read, in a checkpoint's terms (Python's advice on its limit of
    4300 digits is for programs, not for a file)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "int_max_str_digits" in str(exc):
        return "it holds an integer of over 4300 digits, which no checkpoint holds"
    return str(exc)


def parse_header(text: str) -> tuple[dict[str, Any], list[str]]:
    try:
        header = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"the {META_KEY!r} entry is not valid JSON ({json_problem(exc)})") from None
    return header, check_header(header)


def check_index_sha256(header: dict[str, Any], path: str) -> None:
    """Refuse an index edited inside the file, or without its SHA-256 (removing the entry would
    otherwise turn the check off)."""
    if "index_sha256" not in header:
        raise CheckpointError(
            f"{path!r}: its index has no 'index_sha256', so an edit of its class, config, metadata or tree could "
            "not be told (the entry was removed, or an npattn before it was recorded wrote the file); load it with "
            "that npattn and save it again"
        )
    if header["index_sha256"] != index_sha256(header):
        raise index_edited(path)


def index_edited(path: str) -> CheckpointError:
    """The error for an index whose ``index_sha256`` no longer matches it."""
    return CheckpointError(
        f"{path!r}: its index was edited after it was written (class, config, metadata or tree no longer "
        "match its 'index_sha256'); save the object again instead of editing the file"
    )
