"""Reading an npattn .npz without trusting it: ``Npz`` opens the zip, refuses what npattn never
writes (pickles, compressed, encrypted or misnamed members, a directory declaring more bytes than the
file holds) and checks each member's .npy header against the bytes it holds before anything is read."""

from __future__ import annotations

import io
import math
import os
import pickletools
import tokenize
import zipfile
from typing import Any

import numpy as np

from npattn.errors import CheckpointError
from npattn.train.checkpoint_index import META_KEY, parse_header

__all__ = ["Npz"]


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
    """(shape, fortran order, dtype) of a member's .npy header.

    Raises:
        CheckpointError: not an .npy header npattn writes, or one NumPy's parser fails on in any way (an
            unbalanced bracket is a ``tokenize.TokenError``, a descr such as ',f4' a ``SyntaxError``).
    """
    version = np.lib.format.read_magic(f)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version in readers:
        try:
            return readers[version](f)
        except (ValueError, SyntaxError, tokenize.TokenError, RecursionError, MemoryError, TypeError) as exc:
            raise CheckpointError(
                f"{path!r} is truncated, corrupt or not a checkpoint: member {name!r} has a malformed .npy header "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
    raise CheckpointError(
        f"{path!r}: member {name!r} is an .npy file of version {version}, which npattn does not write"
    )


class Npz:
    """An npattn .npz opened for reading, every member checked against the directory and its header."""

    def __init__(self, path: str) -> None:
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if not head:
            empty = "empty (0 bytes), not a zip archive"
            raise CheckpointError(f"{path!r} is truncated, corrupt or not a checkpoint: {empty}")
        if head[:6] == b"\x93NUMPY":
            raise CheckpointError(f"{path!r} is a single .npy array, not an npattn checkpoint (.npz)")
        if _looks_like_pickle(head):
            raise CheckpointError(f"{path!r} contains pickled data; npattn never loads pickles (a raw pickle file)")
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06") and zipfile.is_zipfile(path):
            raise CheckpointError(
                f"{path!r} has bytes before the zip archive (it starts with {head[:8]!r}, and a zip's end record "
                "is found after them: a self-extracting or prefixed zip); an npattn .npz starts with the archive"
            )
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06") and head[8:10] in (b'{"', b"{ ", b"{\n"):
            raise CheckpointError(
                f"{path!r} is not a zip archive, but looks like a .safetensors file (a header length, then JSON): "
                "give it the .safetensors extension to load it as one"
            )
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
            raise CheckpointError(
                f"{path!r} is truncated, corrupt or not a checkpoint: not a zip archive (it starts with {head[:8]!r})"
            )
        self.zip = zipfile.ZipFile(path)
        infos = self.zip.infolist()
        first = min((info.header_offset for info in infos), default=0)
        if first > 0:  # zipfile reads the last archive of a file: one glued behind another, or behind data
            self.zip.close()
            raise CheckpointError(
                f"{path!r} has bytes before the zip archive (its first member starts at byte {first}: another "
                "archive or data glued in front of it); an npattn .npz starts with the archive"
            )
        names = [info.filename for info in infos]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise CheckpointError(f"{path!r}: the zip lists the member(s) {repeated} more than once")
        members = [n[:-4] if n.endswith(".npy") else n for n in names]
        if META_KEY not in members:
            shown = ", ".join(members[:5]) + (", ..." if len(members) > 5 else "")
            if any(n.endswith("data.pkl") for n in names):  # torch.save's zip: a pickle and its storages
                raise CheckpointError(
                    f"{path!r} is a PyTorch torch.save file (a zip holding a pickle), which npattn never loads; save "
                    "the state dict as .safetensors (safetensors.torch.save_file) and load that"
                )
            raise CheckpointError(
                f"{path!r} is a zip (.npz) file but not an npattn checkpoint (no {META_KEY!r} entry; members: {shown})"
            )
        for info in infos:
            if not info.filename.endswith(".npy") or info.flag_bits & 0x1:
                what = "is encrypted" if info.flag_bits & 0x1 else self._not_named_npy(info)
                raise CheckpointError(f"{path!r}: member {info.filename!r} {what}; npattn writes plain .npy members")
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

    def _not_named_npy(self, info: zipfile.ZipInfo) -> str:
        """What is wrong with a member whose name lacks the .npy suffix: the name, or the contents too."""
        try:
            with self.zip.open(info) as f:
                magic = f.read(6)
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, NotImplementedError, RuntimeError):
            magic = b""
        if magic == b"\x93NUMPY" and not info.is_dir():
            return f"is an .npy array, but its name lacks the '.npy' suffix (expected {info.filename + '.npy'!r})"
        return "is not an .npy array"

    def header(self) -> tuple[dict[str, Any], list[str]]:
        text = self.read(META_KEY)
        if text.dtype.kind != "U" or text.shape != ():
            raise CheckpointError(f"{self.path!r}: the {META_KEY!r} entry is not the text an npattn checkpoint holds")
        try:
            header, names = parse_header(str(text[()]))
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
        if any(n < 0 for n in shape):
            raise CheckpointError(
                f"{self.path!r}: member {name!r} declares shape {shape}, with a negative size (the file is corrupt)"
            )
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
