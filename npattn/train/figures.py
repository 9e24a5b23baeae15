"""Figures written like checkpoints: ``check_plot_target(path)`` refuses, before any work, a
``--plot`` path that matplotlib cannot write (no matplotlib, an extension it has no writer for)
or that is not a file (a directory, a device, a missing folder: ``atomic.check_target``), or that
holds a file matplotlib did not write (``check_replaceable``: a re-run replaces its own plot, never
a user's photo or document);
``save_figure(fig, path)`` renders in the format the extension names (PNG without one) and
replaces the file atomically, so the path is exactly the file written.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

from npattn.errors import CheckpointError, ConfigError
from npattn.train.atomic import as_path, atomic_write, check_target, resolved
from npattn.train.saveguard import SaveGuard

__all__ = ["PLOT_HINT", "check_plot_target", "check_replaceable", "save_figure"]

PLOT_HINT = "--plot needs matplotlib: pip install 'npattn[plot]' (or pip install matplotlib)"


def _format(path: str) -> str:
    return os.path.splitext(path)[1][1:].lower() or "png"


def check_plot_target(path: Any, holds: bool = True) -> str:
    """The plot path, checked before any work.

    Raises:
        ConfigError: matplotlib is missing, fails to import (a bad MPLBACKEND), or cannot write the
            file's extension.
        CheckpointError: the path is a directory, a device, or its folder does not exist, or it
            holds a file that is not an image matplotlib wrote (``check_replaceable``).
    """
    try:
        import matplotlib  # noqa: F401  (first: its submodules may be loaded while it is not importable)
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ConfigError(PLOT_HINT) from None
    except ValueError as err:  # matplotlib refuses its settings at import, e.g. MPLBACKEND=nonsense
        raise ConfigError(
            f"--plot: matplotlib fails to start ({err}); check the MPLBACKEND environment variable and "
            "matplotlibrc (npattn draws with the Agg backend whatever they say)"
        ) from None
    text = as_path(path, "plot path")
    real = check_target(text, "plot")
    if holds:  # False: a run that first checks the path is none of its inputs checks this after that
        check_replaceable(real, text)
    ext = _format(text)
    supported = ", ".join(sorted(FigureCanvasBase.get_supported_filetypes()))
    if ext not in FigureCanvasBase.get_supported_filetypes():
        raise ConfigError(f"--plot {text!r}: matplotlib cannot write .{ext} files (it writes {supported})")
    return text


MARK_BYTES = 1 << 16  # matplotlib names itself near the start (PNG, SVG, EPS, PS) or the end (PDF)
CREATOR_ENTRIES = {  # a file's first bytes -> the creator entry matplotlib (3.3 and later) writes in it
    b"\x89PNG\r\n\x1a\n": re.compile(rb"tEXtSoftware\x00Matplotlib version\d"),
    b"%PDF-": re.compile(rb"/Creator \(Matplotlib v\d|/Producer \(Matplotlib pdf backend v\d"),
    b"<?xml": re.compile(rb"<dc:title>Matplotlib v\d"),
    b"<svg": re.compile(rb"<dc:title>Matplotlib v\d"),
    b"%!PS-Adobe": re.compile(rb"(?m)^%%Creator: Matplotlib v\d"),
}


def check_replaceable(real: str, text: str) -> None:
    """An existing ``--plot`` file is replaced only if it is empty, or a PNG, PDF, SVG, EPS or PS file
    (by its first bytes) whose creator entry, in its first or last 64 KiB, is matplotlib's
    (``CREATOR_ENTRIES``: PNG's ``Software`` text chunk "Matplotlib version...", PDF's ``/Creator
    (Matplotlib v...`` or ``/Producer (Matplotlib pdf backend v...``, SVG's ``<dc:title>Matplotlib
    v...``, PostScript's ``%%Creator: Matplotlib v...``), as in every such file matplotlib writes, a
    plot of an earlier run among them. A file that merely mentions matplotlib (a PDF titled "Plotting
    with matplotlib", a GIMP PNG whose comment names it) is refused, as is every other file; JPEG,
    WebP, TIFF, GIF, SVGZ and raw files carry no such entry.

    Raises:
        CheckpointError: naming the path, and how to proceed (remove the file or choose another path).
    """
    try:
        with open(real, "rb") as f:
            head = f.read(MARK_BYTES)
            f.seek(max(0, os.fstat(f.fileno()).st_size - MARK_BYTES))
            tail = f.read(MARK_BYTES)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CheckpointError(f"cannot read the existing plot {text!r}: {exc.strerror or exc}") from None
    entry = next((e for start, e in CREATOR_ENTRIES.items() if head.startswith(start)), None)
    if not head or (entry is not None and (entry.search(head) or entry.search(tail))):
        return
    raise CheckpointError(
        f"--plot {text!r} holds a file that is not an image matplotlib wrote (it starts with {head[:8]!r} and "
        "its creator entry is not matplotlib's); a plot replaces only an earlier plot, never another file: "
        "remove the file or choose another plot path"
    )


def save_figure(fig: Any, path: str, guard: SaveGuard | None = None, **savefig: Any) -> None:
    """Render ``fig`` in the format of ``path``'s extension and replace ``path`` atomically.

    What ``path`` leads to is checked again just before the write: ``guard``, taken when the run
    started, refuses anything put there since (a symlink, even to another plot; another file), and
    ``check_replaceable`` what it holds; such a file is left as it is.

    Raises:
        CheckpointError: the path now holds something put there since the run started, or a file
            that is not an image matplotlib wrote.
    """
    image_bytes = io.BytesIO()
    fig.savefig(image_bytes, format=_format(path), **savefig)
    if guard is not None:
        guard.check()
    check_replaceable(resolved(path, "plot"), path)
    atomic_write(path, image_bytes.getvalue(), "plot")
