"""Figures written like checkpoints: ``check_plot_target(path)`` refuses, before any work, a
``--plot`` path that matplotlib cannot write (no matplotlib, an extension it has no writer for)
or that is not a file (a directory, a device, a missing folder: ``atomic.check_target``), or that
holds a file matplotlib did not write (``check_replaceable``: a re-run replaces its own plot, never
a user's photo or document);
``save_figure(fig, path)`` renders in the format the extension names (PNG without one) and
replaces the file atomically, so the path is exactly the file written.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import struct
import zlib
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
_PNG_SOFTWARE = re.compile(rb"tEXtSoftware\x00Matplotlib version\d")
_PS_CREATOR = re.compile(rb"(?m)^%%Creator: ?(.*)$")
_SVG_OWN_METADATA = re.compile(  # the root's first child, as matplotlib writes it: its creator agent's title
    rb"\A<\?xml[^>]*\?>\s*(?:<!DOCTYPE[^>]*>\s*)?<svg\b[^>]*>\s*(?:<title>[^<]*</title>\s*)?<metadata>\s*"
    rb"<rdf:RDF\b[^>]*>\s*<cc:Work>"
    rb"(?:(?!</cc:Work>)[\s\S])*?<dc:creator>\s*<cc:Agent>\s*<dc:title>Matplotlib v\d"
)
_PDF_LAST_TRAILER = re.compile(rb"trailer\s*<<((?:(?!>>)[\s\S])*)>>\s*startxref\s*\d+\s*%%EOF\s*\Z")
_PDF_MATPLOTLIB_INFO = re.compile(  # matched at the Info object's start
    rb"\s*<<\s*/Creator \(Matplotlib v\d[^)]*\)\s*/Producer \(Matplotlib pdf backend v\d"
)


def _written_by_matplotlib(head: bytes, tail: bytes) -> bool:
    """Whether the file's own creator entry is matplotlib's, where each format keeps it: PNG's
    ``Software`` text chunk; PostScript's first ``%%Creator:`` comment (the header's, not an
    embedded figure's); SVG's metadata, the root's first child, whose creator agent is titled
    ``Matplotlib v...``; PDF's Info dictionary named by its one trailer (no incremental update
    since), written first thing in its object. A thesis embedding a matplotlib figure (dvips's
    ``%%BeginDocument``, pdfTeX's ``/PTEX.InfoDict``, an SVG poster), a document titled
    "Matplotlib v3 ..." and a plot edited since (a PDF annotated in a viewer) were all taken for a
    plot and replaced."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return bool(_PNG_SOFTWARE.search(head) or _PNG_SOFTWARE.search(tail))
    if head.startswith(b"%!PS-Adobe"):
        creator = _PS_CREATOR.search(head)
        return creator is not None and creator.group(1).startswith(b"Matplotlib v")
    if head.startswith((b"<?xml", b"<svg")):
        return bool(_SVG_OWN_METADATA.match(head))
    if head.startswith(b"%PDF-"):
        trailer = _PDF_LAST_TRAILER.search(tail)
        if trailer is None or tail.count(b"%%EOF") != 1 or b"/Prev" in trailer.group(1):
            return False
        info = re.search(rb"/Info (\d+) 0 R", trailer.group(1))
        if info is None:
            return False
        opening = b"\n" + info.group(1) + b" 0 obj"
        start = tail.rfind(opening)
        return start >= 0 and bool(_PDF_MATPLOTLIB_INFO.match(tail, start + len(opening)))
    return False


SEAL_LIMIT = 64 * 2**20  # the largest plot whose seal is read (npattn's plots are far smaller)
_SEAL_NAME = b"npattn-plot-sha256"
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_TEXT_SEALS = {"svg": (b"<!-- " + _SEAL_NAME + b": ", b" -->\n"), "eps": (b"%" + _SEAL_NAME + b": ", b"\n"),
               "ps": (b"%" + _SEAL_NAME + b": ", b"\n")}  # fmt: skip


def _png_seal_chunk(digest: bytes) -> bytes:
    body = b"tEXt" + _SEAL_NAME + b"\x00" + digest
    return struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))


def _sealed(image: bytes, fmt: str) -> bytes:
    """``image`` with npattn's seal: the SHA-256 of the image as matplotlib wrote it, in a PNG text
    chunk before IEND, or a comment after an SVG's root or a PostScript file's end (PDF: none; its
    edits are told by its trailer). A re-run replaces the file only while the seal still matches."""
    digest = hashlib.sha256(image).hexdigest().encode()
    if fmt == "png" and image.endswith(_PNG_IEND):
        return image[: -len(_PNG_IEND)] + _png_seal_chunk(digest) + _PNG_IEND
    if fmt in _TEXT_SEALS and image.endswith(b"\n"):
        opening, closing = _TEXT_SEALS[fmt]
        return image + opening + digest + closing
    return image


def _unsealed(data: bytes) -> tuple[bytes, bytes] | None:
    """(the file without npattn's seal, the digest the seal holds), None for a file without one. The
    seal is looked for anywhere: bytes added after it (a chunk before IEND, a comment after the
    root, data past the end) leave it in place, and the file without it then differs from the image
    it sealed."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        at = data.rfind(b"tEXt" + _SEAL_NAME + b"\x00") - 4
        size = len(_png_seal_chunk(b"0" * 64))
        if at < 0:
            return None
        return data[:at] + data[at + size :], data[at + size - 68 : at + size - 4]
    for opening, closing in set(_TEXT_SEALS.values()):
        at = data.rfind(opening)
        if at >= 0:
            end = at + len(opening) + 64 + len(closing)
            return data[:at] + data[end:], data[at + len(opening) : at + len(opening) + 64]
    return None


def _edited_since_sealed(real: str) -> bool:
    """Whether the file carries npattn's seal and no longer matches it (edited since npattn wrote it)."""
    if os.path.getsize(real) > SEAL_LIMIT:
        return False
    with open(real, "rb") as f:
        found = _unsealed(f.read(SEAL_LIMIT))
    return found is not None and hashlib.sha256(found[0]).hexdigest().encode() != found[1]


def check_replaceable(real: str, text: str) -> None:
    """An existing ``--plot`` file is replaced only if it is empty, or a PNG, PDF, SVG, EPS or PS file
    whose own creator entry is matplotlib's (``_written_by_matplotlib``), as in every such file
    matplotlib writes, a plot of an earlier run among them. A file that merely mentions matplotlib (a
    PDF titled "Plotting with matplotlib", a GIMP PNG whose comment names it, a document embedding a
    matplotlib figure) is refused, as is every other file; JPEG, WebP, TIFF, GIF, SVGZ and raw files
    carry no such entry.

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
    if head and _edited_since_sealed(real):
        raise CheckpointError(
            f"--plot {text!r} holds a plot npattn wrote, edited since (its bytes no longer match the SHA-256 "
            "npattn sealed it with: notes, a comment, a changed chunk); a plot replaces only an earlier plot as it "
            "was written: remove the file or choose another plot path"
        )
    if not head or _written_by_matplotlib(head, tail):
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
    atomic_write(path, _sealed(image_bytes.getvalue(), _format(path)), "plot")
