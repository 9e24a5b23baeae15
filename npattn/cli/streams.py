"""The command line's standard output and error when they misbehave: a full disk, a reader that went
away (``| head -1``), a stream the shell closed (``>&-``, ``2>&-``)."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["RUNS", "OutputRefused", "Stdout", "discard", "encodable", "hold_closed_descriptors", "tell"]


class OutputRefused(Exception):
    """The operating system refused a write to standard output (a full disk, /dev/full)."""


RUNS = ("train", "demo")
"""The commands that train and may write files (a checkpoint, a plot): they run to the end when
nobody reads their output any more (a closed pipe, a closed standard output)."""


class Stdout:
    """``sys.stdout`` while a command runs: a write or flush the OS refuses becomes OutputRefused,
    reported in one line. A reader that went away (``| head -1``) stays a BrokenPipeError, ended
    quietly, except for a run (``keep_going``): its output is discarded from then on and it trains
    to the end, writing its checkpoints. ``stream`` None (standard output closed, ``>&-``)
    discards everything from the start."""

    def __init__(self, stream: TextIO | None, keep_going: bool) -> None:
        self._stream = stream
        self._keep_going = keep_going
        self._worked = False  # a write or flush has reached the stream
        self.refused = ""  # why the OS refused the output of a run that went on without it
        self._fd = _nonblocking_fd(stream)  # a descriptor the parent made non-blocking, else None

    def _attempt(self, action: Callable[[TextIO], Any]) -> None:
        """``action(stream)``, unless the output is discarded."""
        if self._stream is None:
            return
        try:
            action(self._stream)
            if not self._worked:  # the first output: flushed now, so "refused from the start" means the OS refused it
                self._stream.flush()
                self._worked = True
        except BrokenPipeError:
            if not self._keep_going:
                raise
            discard(self._stream)
            self._stream = None
        except OSError as exc:
            if not (self._keep_going and self._worked):  # refused from the start: nothing has run yet
                raise OutputRefused(exc.strerror or str(exc)) from None
            # a disk that filled while a run trained: it goes on without its output (the command
            # line reports the refusal when the run has ended and saved)
            self.refused = exc.strerror or str(exc)
            discard(self._stream)
            self._stream = None

    def write(self, text: str) -> int:
        fd = self._fd
        if fd is None:
            self._attempt(lambda stream: stream.write(encodable(text, stream)))
        else:  # Python's own writes drop what a full non-blocking pipe refuses (EAGAIN) without a word
            self._attempt(lambda stream: _write_waiting(stream, fd, encodable(text, stream)))
        return len(text)

    def flush(self) -> None:
        self._attempt(lambda stream: stream.flush())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _nonblocking_fd(stream: TextIO | None) -> int | None:
    """The file descriptor of ``stream`` if it is non-blocking (a parent set O_NONBLOCK on a pipe
    it reads), else None. Its flags are left alone: the parent shares them."""
    try:
        fd = stream.fileno()  # type: ignore[union-attr]
        return None if os.get_blocking(fd) else fd
    except (AttributeError, OSError, ValueError):
        return None


def _write_waiting(stream: TextIO, fd: int, text: str) -> None:
    """Write ``text`` (encoded as ``stream`` encodes) to the non-blocking ``fd`` in full, waiting
    until the reader makes room whenever the pipe is full; an error other than EAGAIN is raised."""
    stream.flush()  # anything Python still holds goes first
    data = memoryview(text.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace"))
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            select.select([], [fd], [])


def encodable(text: str, stream: Any) -> str:
    """``text`` as ``stream`` can encode it: characters its encoding lacks (an ASCII console and a
    sample of "café") as backslash escapes, so that printing never stops a run or loses its file."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text


def discard(stream: TextIO | None) -> None:
    """Point the file descriptor of ``stream`` at /dev/null, so the interpreter's last flush of what
    is still buffered cannot fail again at exit (Python's advice for a broken pipe)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        _to_devnull(stream.fileno())  # type: ignore[union-attr]


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


def hold_closed_descriptors() -> None:
    """A standard output or error closed by the shell (``>&-``, ``2>&-``) leaves its descriptor free:
    the next file opened (a checkpoint being written) would take it, and anything written to 1 or 2
    would land in that file. /dev/null holds the place instead."""
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                _to_devnull(fd)


def tell(line: str) -> None:
    """``line`` on standard error; nothing if it is closed or refuses the write (a full disk): the
    exit code still says what happened."""
    if sys.stderr is None:  # print(file=None) would write to standard output
        return
    try:
        print(encodable(line, sys.stderr), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        discard(sys.stderr)
