"""A run's save path, watched between its writes: ``SaveGuard`` (``atomic_write`` checks it just
before its rename), so a run that saves repeatedly never replaces a file it did not write."""

from __future__ import annotations

import os
import stat
from typing import Any

from npattn.errors import CheckpointError
from npattn.train.atomic import as_path

__all__ = ["SaveGuard"]


def _file_id(st: os.stat_result) -> tuple[Any, ...]:
    """Kind, device, inode, size and mtime (the size and time tell apart a file rewritten in place or
    a new file that reuses a freed inode), then (ctime, mode, links, owner, group): ``_same``."""
    meta = (st.st_ctime_ns, st.st_mode, st.st_nlink, st.st_uid, st.st_gid)
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, meta)


def _same(now: tuple[Any, ...] | None, was: tuple[Any, ...] | None) -> bool:
    """Two states (the path's id, its symlink's target's id or None) of one file as the run left it.
    The ctime must agree too (a program can put back the mtime, as ``touch -r`` does, not the ctime)
    unless the mode, links or owner changed, which change the ctime alone (a ``chmod``, a hard link
    made for a backup: the run goes on and keeps the new mode)."""
    if now is None or was is None:
        return now is was
    for a, b in zip(now, was):
        if (a is None) != (b is None):
            return False
        if a is not None and (a[:5] != b[:5] or (a[5][1:] == b[5][1:] and a[5][0] != b[5][0])):
            return False
    return True


class SaveGuard:
    """What a run's save path names, so that a run which saves repeatedly never replaces a file it
    did not write. ``state`` is taken when the run starts (nothing, or the file there, such as the
    checkpoint it resumes) and again after each of its writes (from the written file's descriptor);
    ``check()`` (one ``lstat``) refuses a path that holds anything else by then: a symlink put
    there (even to the run's own file), another file, the file rewritten in place. A path that was
    removed holds no one's data: the next save writes it again. A path given as a symlink at the
    start stays one: its target is what is checked."""

    def __init__(self, path: Any, what: str = "checkpoint") -> None:
        self.path = as_path(path, f"{what} path")
        self.what = what
        self.step: int | None = None  # the step of the run's last write, set by the run
        self.written_mode: int | None = None  # the mode of the run's last write
        try:
            self.state = self._now()
        except OSError:
            self.state = None  # check_target reports what cannot be examined

    def _now(self) -> tuple[Any, ...] | None:
        """(the path's own id, the id of the file a symlink there leads to or None), None if nothing."""
        try:
            st = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISLNK(st.st_mode):
            return (_file_id(st), None)
        try:
            return (_file_id(st), _file_id(os.stat(self.path)))
        except OSError:
            return (_file_id(st), None)

    def check(self) -> None:
        """Nothing to say if the path holds what the run last saw there (or nothing at all).

        Raises:
            CheckpointError: naming the path and what changed; the path is left as it is.
        """
        try:
            now = self._now()
        except OSError as exc:
            raise CheckpointError(f"cannot examine {self.what} {self.path!r}: {exc.strerror or exc}") from None
        was = self.state
        if now is None or _same(now, was):
            return  # unchanged, or removed
        if was is not None and now[1] is None and _same((now[0], None), (was[0], None)):
            return  # a symlink given at the start whose target was removed
        since = "the run started" if self.step is None else f"this run last wrote it at step {self.step}"
        raise CheckpointError(
            f"cannot write {self.what} {self.path!r}: it now holds {self._found(now, was)}, put there since {since} "
            f"by someone else (another run with the same {'plot' if self.what == 'plot' else 'save'} path, a user); "
            "it is left as it is, never replaced"
        )

    def _found(self, now: tuple[Any, ...], was: tuple[Any, ...] | None) -> str:
        own, target = now
        if stat.S_ISLNK(own[0]) and (was is None or was[0] != own):
            try:
                return f"a symlink to {os.readlink(self.path)!r}"
            except OSError:
                return "a symlink"
        kind = {stat.S_IFDIR: "a directory", stat.S_IFREG: "a file"}.get((target or own)[0], "something")
        if was is None:
            return f"{kind} that was not there when the run started"
        if kind == "a file" and (target or own)[:3] == (was[1] or was[0])[:3]:  # one inode: edited, or one reused
            if (target or own)[3:5] == (was[1] or was[0])[3:5]:  # size and mtime kept: the ctime alone tells
                return (
                    "the file it last saw there, changed since (its size and mtime as they were, its ctime not: "
                    "written in place with its time put back, or touched, its attributes set, a link made and removed)"
                )
            return "the file it last saw there, modified or replaced by a new one (its size or time changed)"
        return "another file" if kind == "a file" else kind

    def holds_own_write(self) -> bool:
        """The path holds the run's last write as the run left it, its mode too: a file the run may
        replace though no one may write it (the umask made it read-only, as ``umask 0222`` does)."""
        try:
            now = self._now()
            mode = os.stat(self.path).st_mode
        except OSError:
            return False
        return self.written_mode is not None and _same(now, self.state) and mode == self.written_mode

    def wrote(self, written: os.stat_result) -> None:
        """The run's write of ``written`` (its descriptor's stat) is now at the path."""
        self.written_mode = written.st_mode
        was = self.state
        if was is not None and stat.S_ISLNK(was[0][0]):
            self.state = (was[0], _file_id(written))
        else:
            self.state = (_file_id(written), None)
