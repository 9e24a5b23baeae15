"""Figures written like checkpoints: ``check_plot_target(path)`` refuses, before any work, a
``--plot`` path that matplotlib cannot write (no matplotlib, an extension it has no writer for)
or that is not a file (a directory, a device, a missing folder: ``atomic.check_target``);
``save_figure(fig, path)`` renders in the format the extension names (PNG without one) and
replaces the file atomically, so the path is exactly the file written.
"""

from __future__ import annotations

import io
import os
from typing import Any

from npattn.errors import ConfigError
from npattn.train.atomic import as_path, atomic_write, check_target

__all__ = ["PLOT_HINT", "check_plot_target", "save_figure"]

PLOT_HINT = "--plot needs matplotlib: pip install 'npattn[plot]' (or pip install matplotlib)"


def _format(path: str) -> str:
    return os.path.splitext(path)[1][1:].lower() or "png"


def check_plot_target(path: Any) -> str:
    """The plot path, checked before any work.

    Raises:
        ConfigError: matplotlib is missing, fails to import (a bad MPLBACKEND), or cannot write the
            file's extension.
        CheckpointError: the path is a directory, a device, or its folder does not exist.
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
    check_target(text, "plot")
    ext = _format(text)
    supported = ", ".join(sorted(FigureCanvasBase.get_supported_filetypes()))
    if ext not in FigureCanvasBase.get_supported_filetypes():
        raise ConfigError(f"--plot {text!r}: matplotlib cannot write .{ext} files (it writes {supported})")
    return text


def save_figure(fig: Any, path: str, **savefig: Any) -> None:
    """Render ``fig`` in the format of ``path``'s extension and replace ``path`` atomically."""
    image_bytes = io.BytesIO()
    fig.savefig(image_bytes, format=_format(path), **savefig)
    atomic_write(path, image_bytes.getvalue(), "plot")
