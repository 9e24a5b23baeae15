"""The new file an atomic write fills before its rename: ``temp_file`` creates it as ``open()``
creates a file (the umask, or the folder's default access control list, applies), and
``keep_attributes`` gives it the access control list and ``user.*`` extended attributes of the file
it replaces (a rename would drop them)."""

from __future__ import annotations

import errno
import os
import secrets

from npattn.errors import CheckpointError

__all__ = ["KEPT_ATTRIBUTES", "keep_attributes", "temp_file"]


def temp_file(real: str, mode: int = 0o666) -> tuple[int, str]:
    """A new temporary file beside ``real``, named after its first 32 characters (a name that
    ``open()`` accepts, up to 255 bytes, must not become too long with the prefix and suffix),
    created with mode 0o666 as ``open()`` creates a file: the kernel applies the umask, or the
    folder's default access control list where it has one (which the umask does not narrow);
    ``mode`` 0o600 for a file that replaces another, whose own mode is set before anything is written
    (its new contents are never readable by others in between)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    stem = os.path.join(os.path.dirname(real), f".{os.path.basename(real)[:32]}.")
    for _ in range(100):
        name = f"{stem}{secrets.token_hex(4)}.tmp"
        try:
            return os.open(name, flags, mode), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside the file", stem)


KEPT_ATTRIBUTES = "system.posix_acl_access"
"""Extended attributes a replaced file keeps (with every ``user.*`` one): its access control list."""


def keep_attributes(real: str, fd: int, text: str, what: str) -> None:
    """Give the new file the old one's access control list and ``user.*`` extended attributes (a
    rename would drop them: the mode alone then gave the owning group the ACL mask's rights).

    Raises:
        CheckpointError: one could not be set (the previous file is untouched).
    """
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(real)
    except OSError:  # a filesystem without extended attributes
        return
    for name in names:
        if name == KEPT_ATTRIBUTES or name.startswith("user."):
            try:
                os.setxattr(fd, name, os.getxattr(real, name))
            except OSError as exc:
                raise CheckpointError(
                    f"cannot write {what} {text!r}: its extended attribute {name} could not be kept "
                    f"({exc.strerror or exc}); the previous file is untouched"
                ) from None
