"""A plot npattn wrote carries a seal (the SHA-256 of the image matplotlib rendered): a re-run
replaces it while it matches, and refuses it, leaving it byte for byte, once it was edited since (an
SVG with notes added, a PNG with a text chunk or trailing bytes added, an EPS or PS comment). Those
were replaced: only a PDF's edits were told."""

import struct
import zlib

import pytest

from npattn.errors import CheckpointError
from npattn.train.figures import save_figure

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _figure():
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    return fig


def _png_text_chunk(key, text):
    body = b"tEXt" + key + b"\x00" + text
    return struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))


def _before_iend(data, chunk):
    return data[:-12] + chunk + data[-12:]


EDITS = {
    "svg": [lambda d: d.replace(b"</svg>", b'<text x="1" y="2">MY NOTES</text></svg>')],
    "png": [lambda d: _before_iend(d, _png_text_chunk(b"Comment", b"mine")), lambda d: d + b"user bytes",
            lambda d: d[:33] + _png_text_chunk(b"Comment", b"mine") + d[33:]],
    "eps": [lambda d: d + b"% my note\n", lambda d: d.replace(b"showpage", b"% a note\nshowpage", 1)],
    "ps": [lambda d: d + b"% my note\n"],
}  # fmt: skip


@pytest.mark.parametrize("fmt", sorted(EDITS))
def test_a_sealed_plot_is_replaced_as_written_and_refused_once_edited(tmp_path, fmt):
    path = str(tmp_path / f"p.{fmt}")
    fig = _figure()
    try:
        save_figure(fig, path)
        save_figure(fig, path)  # the run's own plot, as written: replaced
        written = open(path, "rb").read()
        assert b"npattn-plot-sha256" in written
        for edit in EDITS[fmt]:
            edited = edit(written)
            assert edited != written
            open(path, "wb").write(edited)
            with pytest.raises(CheckpointError, match="holds a plot npattn wrote, edited since"):
                save_figure(fig, path)
            assert open(path, "rb").read() == edited  # left byte for byte
    finally:
        plt.close(fig)
