"""A Ctrl-C that Python could lose, kept as a flag the training loops look at each step.

The command line's SIGINT handler raises KeyboardInterrupt once (later presses are ignored while
the first is reported). Python drops an exception raised where it cannot propagate (inside a ctypes
callback, such as threadpoolctl's scan of the loaded libraries on the first matrix product, or a
``__del__``): the press was lost and, its successors ignored, the run trained on. So the handler
also sets ``pressed``; ``raise_if_pressed()``, called once per training step, raises the
interrupt the handler could not deliver. In a program of your own (no command-line handler)
``pressed`` stays False and the check costs one attribute read.

While ``python -m npattn`` or the ``npattn`` script imports the package, ``exit_while_starting``
is the handler: nothing has been read or written yet, so it prints the command's one line and ends
the process at once (``os._exit(130)``). An exception raised there would land inside an import:
NumPy's C start-up turned it into an ImportError, and one raised inside an import lock's callback
was dropped, so the command went on and exited 0.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself is not imported (2 ms)
if TYPE_CHECKING:  # nothing else is imported: the command line's Ctrl-C guard is set from here first thing
    from collections.abc import Sequence
    from typing import Any

__all__ = ["command_of", "exit_while_starting", "press", "pressed", "raise_if_pressed"]

pressed = False


def press() -> None:
    """Record a Ctrl-C the command line is about to raise."""
    global pressed
    pressed = True


def raise_if_pressed() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C was pressed (and lost on its way to the loop).

    Raises:
        KeyboardInterrupt: after ``press()``.
    """
    if pressed:
        raise KeyboardInterrupt


def command_of(argv: Sequence[str]) -> str:
    """The command an ``npattn`` command line names (its first word after the program name, when it is
    no option), ``demo`` when it names none: ``npattn train --steps 5`` -> ``train``."""
    words = list(argv)[1:]
    return words[0] if words and not words[0].startswith("-") else "demo"


def exit_while_starting(signum: int, frame: Any) -> None:
    """Ctrl-C while the command line is still importing: ``npattn COMMAND: interrupted`` on standard
    error (nothing if it is closed) and exit 130 at once. Never returns."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(f"npattn {command_of(sys.argv)}: interrupted\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(130)
