"""A ``--plot`` path is replaced only by a file whose creator entry is matplotlib's: a file that
merely mentioned matplotlib anywhere in its first or last 64 KiB (a PDF titled "Plotting with
matplotlib", a GIMP PNG whose comment names it, a PNG from "notmatplotlib exporter") was taken for
an earlier plot and overwritten."""

import zlib

import pytest

from npattn.errors import CheckpointError
from npattn.train.figures import check_replaceable


def _png_with_text(keyword: bytes, text: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    header = chunk(b"IHDR", (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0]))
    return b"\x89PNG\r\n\x1a\n" + header + chunk(b"tEXt", keyword + b"\x00" + text) + chunk(b"IEND", b"")


FOREIGN = {
    "pdf titled with matplotlib": b"%PDF-1.4\n1 0 obj << /Title (Plotting with matplotlib) /Producer (pdfTeX) >>\n",
    "gimp png naming matplotlib": _png_with_text(b"Comment", b"notes on matplotlib colormaps")
    + _png_with_text(b"Software", b"GIMP 2.10")[8:],
    "png from notmatplotlib": _png_with_text(b"Software", b"notmatplotlib exporter"),
    "svg comment": b'<?xml version="1.0"?>\n<!-- drawn in Inkscape after matplotlib -->\n<svg></svg>\n',
    "eps by inkscape": b"%!PS-Adobe-3.0 EPSF-3.0\n%%Creator: Inkscape (matplotlib look-alike)\n%%EOF\n",
}


@pytest.mark.parametrize("content", FOREIGN.values(), ids=FOREIGN.keys())
def test_a_file_that_only_mentions_matplotlib_is_refused(tmp_path, content):
    path = tmp_path / "p.out"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=r"its creator entry is not matplotlib's"):
        check_replaceable(str(path), str(path))
    assert path.read_bytes() == content


@pytest.mark.parametrize("ext", ["png", "pdf", "svg", "eps", "ps"])
def test_a_plot_matplotlib_wrote_is_replaceable(tmp_path, ext):
    plt = pytest.importorskip("matplotlib.pyplot")
    path = tmp_path / f"p.{ext}"
    fig = plt.figure()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    check_replaceable(str(path), str(path))  # nothing to say
