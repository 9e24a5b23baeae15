"""A .safetensors file's bytes as (header dict, body) and back, for tests that edit the header."""

import json


def split(data: bytes) -> tuple[dict, bytes]:
    """(the JSON header, the tensor bytes after it)."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def joined(header: dict, body: bytes) -> bytes:
    """The file's bytes for ``header`` (re-encoded, its length in front) and ``body``."""
    text = json.dumps(header).encode("utf-8")
    return len(text).to_bytes(8, "little") + text + body
