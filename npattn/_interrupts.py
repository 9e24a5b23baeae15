"""A Ctrl-C that Python could lose, kept as a flag the training loops look at each step.

The command line's SIGINT handler raises KeyboardInterrupt once (later presses are ignored while
the first is reported). Python drops an exception raised where it cannot propagate (inside a ctypes
callback, such as threadpoolctl's scan of the loaded libraries on the first matrix product, or a
``__del__``): the press was lost and, its successors ignored, the run trained on. So the handler
also sets ``pressed``; ``raise_if_pressed()``, called once per training step, raises the
interrupt the handler could not deliver. In a program of your own (no command-line handler)
``pressed`` stays False and the check costs one attribute read.
"""

from __future__ import annotations

__all__ = ["press", "pressed", "raise_if_pressed"]

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
