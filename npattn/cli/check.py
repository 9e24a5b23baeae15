"""``npattn check FILE.py:NAME``, run in a child process: the user's code cannot end, hang or
change the process that reports on it.

The child imports the file, runs the user's attention and builds the report (the weights and x
stay untouched: ``npattn.debug.usercode`` hands the user copies), then sends the report and the
output. The parent waits at most ``timeout`` seconds and turns every way the child can end into
one line and exit code 2: the user's code raised, called ``sys.exit``, raised
``KeyboardInterrupt``, ended the process (``os._exit``, a crash) or ran past the timeout (the
child is killed). The child runs in a session and process group of its own, and the whole
group is killed when the check ends, so processes the user's code starts (``os.fork``,
``subprocess``) do not outlive it (unless they start a session of their own); should the parent
end without killing it (SIGTERM, SIGHUP, ``timeout(1)``), a watchdog process in the group ends
it at once, and in any case ``GRACE`` seconds after the timeout. The forward's
verdicts (at the book's shape and at the second shape) are the parent's own: it compares the
outputs with the references computed from pristine weights in a process the user's code never
ran in, so code that patches NumPy or npattn while it runs cannot certify a wrong output (the
backward and dropout checks run the user's code, so their verdicts come from the child).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import select
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Any, TextIO

import numpy as np

from npattn.book import book_batch, book_inputs
from npattn.cli.argtypes import plain_number
from npattn.debug.diagnose import Diagnosis, diagnose
from npattn.debug.usercode import (
    book_weights,
    check_attention,
    multihead_diagnosis,
    multihead_weights,
    second_shape_inputs,
)
from npattn.errors import ConfigError, NpattnError
from npattn.train.atomic import sigint_held

__all__ = ["DEFAULT_TIMEOUT", "parse_timeout", "run_check_isolated"]

DEFAULT_TIMEOUT = 5.0
"""Seconds ``npattn check`` waits for the user's code (import, construction, forward, report)."""


MAX_TIMEOUT = 86400.0  # a day: the longest wait the check accepts (the OS's timers take no more)


def parse_timeout(text: Any) -> float:
    """``--timeout`` as seconds: a finite number > 0, at most a day (``MAX_TIMEOUT``).

    Raises:
        ConfigError: anything else (the CLI prints it on one line, exit 2).
    """
    seconds = plain_number(text)
    if seconds is None and isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)  # called from Python with a number
    if seconds is None or not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise ConfigError(f"--timeout must be a number of seconds > 0 and <= {MAX_TIMEOUT:g}, got {text!r}")
    return seconds


CHANNEL_CLOSED = 86
"""The exit code of a check's process whose report could not be sent: the user's code closed its pipe."""


def _child(conn: Connection, spec: str, alive: tuple[int, int] | None, timeout: float) -> None:
    """Run the check; send ("report", text, exit code, the forward's ``_state``, output, causal, num_heads,
    (the forward's state, output, on a batch) at the second shape or None) or ("error", one line).
    ``alive``: the pipe whose write end only the parent holds (``_watchdog``)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # forked while the parent held Ctrl-C back
    _own_session()
    if alive is not None:
        _watchdog(conn, alive, timeout + GRACE)
    # The file's own modules beside it, also imported inside its functions as they run (the import
    # alone has that folder on the path): this process is the check's and ends with it.
    try:
        sys.path.insert(0, os.path.dirname(os.path.realpath(spec.rpartition(":")[0] or ".")))
    except OSError:  # the current folder was removed: the file is not found, which the check reports
        pass
    result: tuple[Any, ...]
    try:
        report = check_attention(spec)
        output = _as_sent(report.output)
        forward = _state(report.diagnosis)
        second = report.second
        other = None if second is None else (_state(second.diagnosis), _as_sent(second.output), report.second_batched)
        code = 0 if report.passed else 3 if report.not_judged else 1
        result = ("report", str(report) + "\n", code, forward, output, report.causal, report.num_heads, other)
    except NpattnError as exc:
        result = ("error", str(exc))
    except SystemExit as exc:
        result = ("error", f"{spec} called sys.exit({exc.code!r}); npattn check needs the code to return an output")
    except BaseException as exc:  # KeyboardInterrupt, or anything the report itself could not handle
        said = f": {exc}" if str(exc) else ""
        where = " (its code, at import or when run, or a SIGINT it sent)" if isinstance(exc, KeyboardInterrupt) else ""
        result = ("error", f"{spec} raised {type(exc).__name__}{said}{where}")
    try:
        conn.send(result)
        conn.close()
    except OSError:  # the code closed the pipe it inherited (a loop of os.close over the descriptors)
        os._exit(CHANNEL_CLOSED)


def _as_sent(output: Any) -> np.ndarray:
    """The output as the parent re-checks it: its dtype kept when it is float16, float32 or float64
    (each is allowed its own rounding), else as float64."""
    output = np.asarray(output)
    return np.array(output, dtype=output.dtype if output.dtype in (np.float16, np.float32) else np.float64)


def _own_session() -> None:
    """Make this process the leader of a new session and process group, so that the parent can
    stop it together with every process the user's code starts (os.fork, subprocess)."""
    if hasattr(os, "setsid"):
        try:
            os.setsid()
        except OSError:  # already a group leader: the parent still kills this process itself
            pass


GRACE = 2.0
"""Seconds past ``--timeout`` after which the child's group is ended, should the parent not have."""


def _watchdog(conn: Connection, alive: tuple[int, int], seconds: float) -> None:
    """In the child, before the user's code runs: fork a watchdog into the child's process group that
    kills the whole group once the parent is gone (its pipe ``alive`` reads end-of-file: only the
    parent held the write end) or ``seconds`` have passed. A parent ended by SIGTERM, SIGHUP or
    ``timeout(1)`` cannot kill the child, which has a session of its own, and the user's code ran on,
    orphaned, past its ``--timeout``; a process of its own, the watchdog needs no share of the
    user's code's interpreter (a thread could not run while that code held the GIL)."""
    read_end, write_end = alive
    os.close(write_end)
    if os.fork() == 0:
        try:
            conn.close()  # the parent's wait for the report must end when the child does
            select.select([read_end], [], [], seconds)
            os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(read_end)


def _kill_group(child: Any) -> None:
    """Kill the child and every process left in its process group (the user's code's own children)."""
    if hasattr(os, "killpg") and child.pid is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # nothing left in the group
            pass
    if child.is_alive():
        child.kill()


def _wait_group_gone(pgid: int | None, seconds: float = 0.2) -> None:
    """Wait (at most ``seconds``) until no process of the killed group is left, so that none of
    them is still there when ``npattn check`` returns."""
    if not hasattr(os, "killpg") or pgid is None:
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if not _running_in(pgid):  # only zombies left (the watchdog, orphaned until init reaps it)
            return
        time.sleep(0.01)


def _running_in(pgid: int) -> bool:
    """Whether a process of group ``pgid`` other than a zombie is left (True where /proc cannot tell):
    a killed process stays in its group as a zombie until reaped, which took the whole wait."""
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return True
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _state(diagnosis: Diagnosis) -> str:
    """A forward's verdict: "correct", "not judged" (a float16 output within float16's own error) or "wrong"."""
    return "correct" if diagnosis.correct else "not judged" if diagnosis.not_judged else "wrong"


def _forward_verdict(
    spec: str,
    forward: str,
    output: np.ndarray,
    causal: bool,
    num_heads: int | None,
    second: bool = False,
    batched: bool = False,
) -> None:
    """The parent's own check of the child's output against pristine weights, which must give the
    child's verdict ``forward`` (``_state``); at the second shape with ``second`` (on its batch with
    ``batched``).

    Raises:
        ConfigError: the verdicts differ (the user's code changed NumPy or npattn while it ran).
    """
    if second:
        x, W = second_shape_inputs(causal, num_heads, batched)
    else:
        x = book_batch() if causal else book_inputs()
        W = multihead_weights() if num_heads else book_weights()
    if num_heads:  # as usercode's multi-head diagnosis: the output as a whole
        ours = _state(multihead_diagnosis(x, W, output, num_heads))
    elif output.shape == (*x.shape[:-1], W["W_query"].shape[1]):
        ours = _state(diagnose(x, W, output, causal=causal, catalogue=()))
    else:
        ours = "wrong"
    if ours != forward:
        raise ConfigError(
            f"{spec}: the report says its output is {forward}, but the same check outside its process says it is "
            f"{ours}: the code changed NumPy or npattn while it ran; not certified"
        )


def run_check_isolated(spec: str, *, timeout: float = DEFAULT_TIMEOUT, out: TextIO | None = None) -> int:
    """``npattn check``: the report on ``out`` (default stdout); 0 correct, 1 wrong, 3 not judged (a
    float16 output within float16 arithmetic's own error).

    Raises:
        ConfigError: everything ``run_check`` raises, and the user's code calling sys.exit, raising
            KeyboardInterrupt, ending the process or running longer than ``timeout`` seconds.
    """
    timeout = parse_timeout(timeout)
    methods = multiprocessing.get_all_start_methods()
    context: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    receive, send = context.Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):  # None when the shell closed it (2>&-)
        if stream is not None:
            stream.flush()
    forked = context.get_start_method() == "fork" and hasattr(os, "killpg")
    alive = os.pipe() if forked else None  # its write end stays open here as long as this process lives
    child = context.Process(target=_child, args=(send, spec, alive, timeout), daemon=True)
    # Ctrl-C (from the terminal, or from the user's code signalling this process) waits until the
    # child is started: raised inside fork's own handlers it would print "Exception ignored" lines
    # beside the one-line report.
    try:
        with sigint_held():
            child.start()
    except BaseException:
        if alive is not None:
            os.close(alive[1])
        raise
    finally:
        send.close()
        if alive is not None:
            os.close(alive[0])
    try:
        if not receive.poll(timeout):
            _kill_group(child)
            raise ConfigError(
                f"{spec} did not finish within {timeout:g} s (an endless loop? a slow import?); "
                "it was stopped (give it longer with --timeout SECONDS)"
            )
        try:
            result = receive.recv()
        except EOFError:
            child.join()
            if child.exitcode == CHANNEL_CLOSED:
                raise ConfigError(
                    f"{spec} closed the pipe npattn check reports through (the file descriptors its process "
                    "inherited: os.close over a range of them?): leave descriptors it did not open alone"
                ) from None
            raise ConfigError(
                f"{spec} ended the process before npattn check could report (exit code {child.exitcode}): "
                "does it call os._exit, or crash the interpreter?"
            ) from None
    finally:
        receive.close()
        # The child has sent its result (or failed): stop it and whatever the user's code started (a
        # thread keeping it alive, a forked process), before join reaps it and frees its group id.
        _kill_group(child)
        child.join()
        _wait_group_gone(child.pid)
        if alive is not None:
            os.close(alive[1])
    if result[0] == "error":
        raise ConfigError(result[1])
    _, text, code, forward, output, causal, num_heads, other = result
    # The forward verdicts are recomputed here; the backward and dropout checks need the user's code.
    _forward_verdict(spec, forward, output, causal, num_heads)
    states = {forward}
    if other is not None:
        other_forward, other_output, batched = other
        _forward_verdict(spec, other_forward, other_output, causal, num_heads, second=True, batched=batched)
        states.add(other_forward)
    print(text, end="", file=out or sys.stdout)
    if "wrong" in states or code not in (0, 3):  # never better than this process's own forward verdicts
        return 1
    return 3 if "not judged" in states else code
