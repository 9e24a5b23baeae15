"""Files that are replaced whole or not at all: the checks and the atomic write behind checkpoints.

``check_target(path)`` decides, before anything is written, where the bytes will go: a regular file
(or a new one in an existing folder) is replaced; a symlink is followed, like ``open()`` follows it,
so the file it points to is replaced and the link stays; a directory, a device, a FIFO or a socket
is refused, never replaced. ``atomic_write`` writes a temporary file in the same folder (flush,
fsync), gives it the old file's permissions (a new file gets ``0o666 & ~umask``, like ``open()``),
checks the target again (a target that became a symlink, a device or read-only meanwhile is refused),
renames it over the target with ``os.replace`` and fsyncs the folder: a crash leaves the old file or
the new one, and a failure that can be seen (a full disk, a folder without write permission)
removes the temporary file and leaves the old file as it was. ``check_source(path)`` refuses
anything but an existing regular file before it is opened, so a FIFO or ``/dev/zero`` never hangs a
load.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from npattn.errors import CheckpointError, ConfigError
from npattn.train.newfile import keep_attributes, temp_file

if TYPE_CHECKING:
    from npattn.train.saveguard import SaveGuard

__all__ = [
    "as_path", "atomic_write", "check_checkpoint_target", "check_distinct", "check_source",
    "check_target", "probe_target", "read_bytes", "sigint_held",
]  # fmt: skip

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def as_path(path: Any, what: str = "checkpoint path") -> str:
    """``path`` as a str: a str, bytes or os.PathLike naming something (not empty, no NUL byte)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise CheckpointError(f"{what} must be a str or os.PathLike, got {type(path).__name__}")
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError as exc:  # a PathLike whose __fspath__ gives neither str nor bytes
        raise CheckpointError(f"{what} must be a str or os.PathLike giving a str: {exc}") from None
    if not text:
        raise CheckpointError(f"{what} must name a file, got ''")
    if "\x00" in text:
        raise CheckpointError(f"{what} {text!r} holds a NUL byte, which no file name can hold")
    return text


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the path is."""
    return None if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_source(path: Any, what: str = "checkpoint") -> str:
    """The path of an existing regular file to read (symlinks followed); ``what`` names it in messages.

    Raises:
        CheckpointError: missing, a directory, a device, a FIFO, or unreadable.
    """
    text = as_path(path, f"{what} path")
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        raise CheckpointError(f"{what} {text!r} does not exist") from None
    except NotADirectoryError:  # a folder on the way is a file
        folder = next((f for f in _folders_of(text) if os.path.exists(f) and not os.path.isdir(f)), None)
        why = f"{folder!r} is a file, not a folder" if folder else "a folder on its path is not a folder"
        raise CheckpointError(f"cannot read {what} {text!r}: {why}") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {what} {text!r}: {exc.strerror or exc}") from None
    kind = _kind(mode)
    if kind:
        raise CheckpointError(f"{what} {text!r} is {kind}, not a file")
    if not os.access(text, os.R_OK):
        raise CheckpointError(f"cannot read {what} {text!r}: permission denied")
    return text


def _writable_bits(mode: int) -> bool:
    """False for a file or folder no one may write (no write bit at all): refused for every user,
    root included, whom ``os.access`` lets write anything."""
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _why_unwritable(real: str, mode: int) -> str:
    """Why an existing file the OS will not let us write cannot be replaced: its mode, else its mount."""
    if not _writable_bits(mode):
        return "permission denied (the file is read-only)"
    if os.statvfs(real).f_flag & os.ST_RDONLY:  # EROFS
        return "the filesystem is mounted read-only"
    return "the file cannot be replaced (permission denied: an immutable flag, an ACL or the folder's permissions)"


def _identity(path: str) -> tuple[Any, ...]:
    """What names one file: its device and inode if it exists (hard links and symlinks included),
    else its resolved path."""
    try:
        st = os.stat(path)
    except OSError:
        return ("new", os.path.normcase(resolved(path, "file")))
    return (st.st_dev, st.st_ino)


def resolved(text: str, what: str) -> str:
    """``os.path.realpath(text)``; a CheckpointError, not a raw FileNotFoundError, when a relative
    path cannot be resolved because the working folder was deleted."""
    try:
        return os.path.realpath(text)
    except OSError as exc:
        raise CheckpointError(
            f"cannot resolve {what} {text!r}: the working folder no longer exists ({exc.strerror or exc}); "
            "use an absolute path, or run from an existing folder"
        ) from None


def check_distinct(outputs: dict[str, Any], inputs: dict[str, Any], may_equal: tuple[str, str] | None = None) -> None:
    """No file a run writes (``outputs``: label -> path or None) is a file it reads (``inputs``) or
    another output, also through symlinks and hard links; ``may_equal`` is the one (input, output)
    pair of labels that may name the same file (a checkpoint saved over the one it resumes).

    Raises:
        ConfigError: naming both labels and paths, before anything is read or written.
    """
    seen: list[tuple[str, str, str, tuple[Any, ...]]] = []
    for kind, paths in (("reads", inputs), ("writes", outputs)):
        for label, path in paths.items():
            if path is None:
                continue
            text = as_path(path, f"{label} path")
            ident = _identity(text)
            for other_kind, other, other_text, other_ident in seen:
                if ident == other_ident and (other, label) != may_equal:
                    raise ConfigError(
                        f"{label} {text!r} is the file the run {other_kind} as {other} {other_text!r}: "
                        "writing it would destroy that file; choose another path"
                    )
            seen.append((kind, label, text, ident))


def _into_proc(text: str) -> str | None:
    """The path under /proc that resolving ``text`` reaches (``/dev/stdout`` ->
    ``/proc/self/fd/1``), else None. A process's fd links lead to whatever the descriptor is open on
    (the file standard output is redirected to): replacing that would destroy it."""
    path = os.path.abspath(text)
    for _ in range(40):  # links followed; a loop is left to realpath's own error
        parts = path.split(os.sep)
        for i in range(2, len(parts) + 1):
            prefix = os.sep.join(parts[:i])
            if prefix == "/proc" or prefix.startswith("/proc/"):
                return path
            if os.path.islink(prefix):
                target = os.path.join(os.path.dirname(prefix), os.readlink(prefix))
                path = os.path.normpath(os.path.join(target, *parts[i:]))
                break
        else:
            return None
    return None


def _folders_of(text: str) -> list[str]:
    """The folders of a path, outermost first ("a/b/c.npz" -> "a", "a/b")."""
    folders, folder = [], os.path.dirname(text)
    while folder and folder not in folders and os.path.dirname(folder) != folder:
        folders.append(folder)
        folder = os.path.dirname(folder)
    return folders[::-1] or [text]


def _not_a_folder(path: str) -> str:
    """Why ``path``, named as a file's folder, is none: "is a file, not a folder", ..."""
    if os.path.isfile(path):
        return "is a file, not a folder"
    if os.path.exists(path):
        return "is not a folder"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links (each leads back to another), not a folder"
    return "is a symbolic link to a missing folder" if os.path.islink(path) else "does not exist"


def check_target(path: Any, what: str = "checkpoint", own: bool = False) -> str:
    """The file that saving to ``path`` will replace (symlinks followed), checked before writing;
    ``own``: the file is the caller's own last write, as it left it, replaced even when read-only
    (``SaveGuard.holds_own_write``).

    Raises:
        CheckpointError: the path is a directory, a device, a FIFO or a socket (or a link to one),
            leads into /proc (``/dev/stdout``, ``/dev/fd/1``: a process's open file, not a file to
            replace), its folder does not exist, or the file or folder is not writable.
    """
    text = as_path(path, f"{what} path")
    if text.endswith(os.sep) or (os.altsep and text.endswith(os.altsep)):
        raise CheckpointError(f"cannot write {what} {text!r}: the path ends in a separator (a folder); name a file")
    if os.path.basename(text) in (os.curdir, os.pardir):
        last = os.path.basename(text)
        raise CheckpointError(f"cannot write {what} {text!r}: the path ends in {last!r} (a folder); name a file")
    real = resolved(text, what)  # first: a deleted working folder is named as such
    given_folder = os.path.dirname(text)
    if given_folder and not os.path.isdir(given_folder):  # "nosuch/../x.npz": open() refuses it, realpath does not
        problem = _not_a_folder(given_folder)
        raise CheckpointError(f"cannot write {what} {text!r}: the folder {given_folder!r} {problem}")
    proc = _into_proc(text)
    if proc is not None:
        via = "" if os.path.abspath(text) == proc else f" (it leads to {proc!r})"
        raise CheckpointError(
            f"cannot write {what} {text!r}: it lies under /proc{via}, where npattn writes nothing (a process's "
            "open files and settings, such as standard output, live there); name the file by a path outside /proc"
        )
    st = _existing_file(real, text, what)
    if st is not None and not own:
        if not os.access(real, os.W_OK) or not _writable_bits(st.st_mode):
            raise CheckpointError(f"cannot write {what} {text!r}: {_why_unwritable(real, st.st_mode)}")
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        problem = _not_a_folder(folder)
        raise CheckpointError(f"cannot write {what} {text!r}: the folder {folder!r} {problem}")
    if not os.access(folder, os.W_OK | os.X_OK) or not _writable_bits(os.stat(folder).st_mode):
        if _writable_bits(os.stat(folder).st_mode) and os.statvfs(folder).f_flag & os.ST_RDONLY:  # EROFS
            raise CheckpointError(f"cannot write {what} {text!r}: the folder {folder!r} is on a read-only filesystem")
        raise CheckpointError(f"cannot write {what} {text!r}: permission denied in the folder {folder!r}")
    return real


def _existing_file(real: str, text: str, what: str) -> os.stat_result | None:
    """One stat of the target gives both its type and the mode the new file takes from it: None if
    it does not exist; refused unless it is a regular file (so only a regular file's mode is copied)."""
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot write {what} {text!r}: {exc.strerror or exc}") from None
    kind = _kind(st.st_mode)
    if kind:
        via = f" (the symlink points to {real!r})" if real != os.path.abspath(text) else ""
        raise CheckpointError(f"cannot write {what} {text!r}: it is {kind}{via}; save to a file path")
    return st


def check_checkpoint_target(path: Any, own: bool = False) -> tuple[str, bool]:
    """``check_target`` for a checkpoint (``own`` as there), and its format: (the file replaced, True
    for safetensors).
    ``load`` reads the format from the name it is given, so a symlink whose name and target
    disagree (``a.safetensors`` -> ``a.npz``) is refused: one name would read back the other format.

    Raises:
        CheckpointError: as ``check_target``, or such a symlink (naming both names).
    """
    text = as_path(path)
    real = check_target(text, own=own)
    safetensors = text.lower().endswith(".safetensors")
    if real.lower().endswith(".safetensors") != safetensors:
        raise CheckpointError(
            f"cannot write checkpoint {text!r}: it is a symlink to {real!r}, and the two names disagree on the format "
            "(a .safetensors name or not), which save and load take from the name; use names that agree"
        )
    return real, safetensors


def check_run_target(path: Any, holds: bool = True) -> str:
    """A training run's ``--save`` target: what ``check_target`` accepts (a device such as /dev/null
    is refused as a device, not for its name), a path ending in .npz (the checkpoint holds optimizer
    state and history, which .safetensors cannot), then ``probe_target``, then what the file there
    holds (``checkpoint_target.check_run_file``: nothing, or a training run's checkpoint) unless
    ``holds`` is False (a run that first checks that ``path`` is none of its inputs calls
    ``check_outputs`` after that). One rule for every task.

    Raises:
        ConfigError: another extension. CheckpointError: as ``probe_target``, or the path holds
            another file (an ``np.savez`` file, a model saved with ``npattn.save``, text, ...).
    """
    name = as_path(path)
    check_checkpoint_target(name)
    if not name.lower().endswith(".npz"):
        raise ConfigError(
            "--save: a training checkpoint is an .npz file (it holds the optimizer state and the history), "
            f"got {name!r}"
        )
    real = probe_target(path)
    if holds:
        check_outputs(path)
    return real


def check_outputs(save: Any, plot: Any = None) -> None:
    """What a run's ``save`` and ``plot`` targets hold (None: no such target), for a run that first
    checks they are none of its inputs: ``checkpoint_target.check_outputs``."""
    from npattn.train.checkpoint_target import check_outputs  # reads checkpoints: above this module

    check_outputs(save, plot)


def probe_target(path: Any, what: str = "checkpoint") -> str:
    """``check_target``, then a real test of the folder: a temporary file is created there and
    removed, as ``atomic_write`` will create one. Permission bits do not say everything (root
    passes every ``os.access`` check, a read-only file system or /proc refuses all the same), so a
    run that saves at its end calls this before its first step.

    Raises:
        CheckpointError: as ``check_target``, or the folder refuses a new file (the OS's reason).
    """
    real = check_target(path, what)
    try:
        fd, tmp = temp_file(real)
    except OSError as exc:
        raise CheckpointError(
            f"cannot write {what} {as_path(path)!r}: the folder {os.path.dirname(real)!r} refuses a new file "
            f"({exc.strerror or exc})"
        ) from None
    os.close(fd)
    os.unlink(tmp)
    return real


def read_bytes(path: str, what: str = "checkpoint", limit: int | None = None) -> bytes:
    """The bytes of the file ``check_source`` accepted; CheckpointError (not a raw OSError) if the
    OS refuses to read it (no permission, an I/O error), or if it holds more than ``limit`` bytes
    (at most ``limit + 1`` are read)."""
    try:
        with open(path, "rb") as f:
            data = f.read() if limit is None else f.read(limit + 1)
    except OSError as exc:
        raise CheckpointError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    if limit is not None and len(data) > limit:
        raise CheckpointError(f"{what} {path!r} is larger than {limit:,} bytes, more than npattn reads")
    return data


def atomic_write(
    path: Any, data: bytes, what: str = "checkpoint", guard: SaveGuard | None = None
) -> os.stat_result:
    """Replace the file ``check_target(path)`` names with ``data``, atomically (see the module doc);
    returns the written file's stat, taken from its descriptor (what a later ``os.stat`` of the path
    shows unless the file was replaced since). ``guard``: a run's ``SaveGuard``, checked just before
    the rename (a path changed by someone else since the run last wrote it is refused, left as it is)
    and told what was written.

    Raises:
        CheckpointError: the target is refused by ``check_target``, or writing fails (the message
            says why; the previous file is untouched and no temporary file is left).
    """
    text = as_path(path, f"{what} path")
    if guard is not None:
        guard.check()  # first: a file someone put there since is named as such, read-only or not
    real = check_target(text, what, own=guard is not None and guard.holds_own_write())
    folder = os.path.dirname(real)
    old = _existing_file(real, text, what)  # again: the target may have changed since check_target
    tmp = None
    try:
        fd, tmp = temp_file(real, 0o666 if old is None else 0o600)
        with os.fdopen(fd, "wb") as f:
            # the old file's permissions before any byte is written: a private file's new contents are
            # never readable by others in between (a new file keeps the mode open() gave it)
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                keep_attributes(real, fd, text, what)
            if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fd, old.st_uid, old.st_gid)
                except OSError:
                    pass  # only root may give a file away; the permissions are kept all the same
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            _keep_mode_set_meanwhile(real, old, f.fileno(), text, what)
            written = os.fstat(f.fileno())
            if os.name == "posix":  # renamed while open: its stat after the rename, whose ctime the rename set
                _replace(tmp, real, guard)
                tmp = None
                written = os.fstat(f.fileno())
        if tmp is not None:
            _replace(tmp, real, guard)
            tmp = None
        if guard is not None:
            guard.wrote(written)
    except OSError as exc:
        raise CheckpointError(
            f"could not write {what} {text!r}: {exc.strerror or exc}; the previous file (if any) is untouched"
        ) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    _fsync_folder(folder)
    return written


def _replace(tmp: str, real: str, guard: Any) -> None:
    """The new file put in place, once ``guard`` (if any) finds the path as the run left it."""
    if guard is not None:
        guard.check()
    os.replace(tmp, real)


def _keep_mode_set_meanwhile(real: str, old: os.stat_result | None, fd: int, text: str, what: str) -> None:
    """The target just before the rename: one that became anything but a regular file (a symlink
    the rename would replace, a device) or read-only while the new one was written is refused and
    left as it is; another new mode is given to the new file."""
    try:
        now = os.lstat(real)  # ``real`` was resolved: a link there now was put there meanwhile
    except FileNotFoundError:
        return
    kind = "a symlink" if stat.S_ISLNK(now.st_mode) else _kind(now.st_mode)
    if kind:
        raise CheckpointError(
            f"cannot write {what} {text!r}: it became {kind} while the new file was written; it is left as it "
            "is, never replaced"
        )
    if old is not None and now.st_mode == old.st_mode:
        return
    if not _writable_bits(now.st_mode) or not os.access(real, os.W_OK):
        raise CheckpointError(
            f"cannot write {what} {text!r}: it was made read-only while the new file was written; the previous "
            "file is untouched"
        )
    os.fchmod(fd, stat.S_IMODE(now.st_mode))


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


@contextmanager
def sigint_held() -> Iterator[None]:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP wait until the block ends, then act as they would have:
    a save and the record of what it saved happen whole. An interrupt inside the zip writer left a
    ZipFile whose cleanup raised ValueError; one between the replace and the record reported the
    step before; a SIGTERM (``kill``, ``timeout``) mid-write left the temporary file. Nothing is
    held outside the main thread (only it receives signals) or if a handler cannot be set."""
    pending: list[int] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _HELD:
            try:
                previous[signum] = signal.signal(signum, lambda number, frame: pending.append(number))
            except (ValueError, OSError):
                break
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: one set outside Python
    if pending:  # only after the block succeeded: a failure in it is the error to report
        signal.raise_signal(pending[0])


_HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
