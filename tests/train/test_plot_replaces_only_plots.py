"""A --plot target is replaced only when its own creator entry is matplotlib's: a document that
embeds a matplotlib figure (dvips PostScript, a pdfLaTeX PDF, an SVG poster), an SVG titled
"Matplotlib v3 ..." and a plot edited since (a PDF annotated in a viewer) were taken for a plot,
because the check looked for the marker anywhere in the file's first or last 64 KiB."""

import io

import pytest

from npattn.errors import CheckpointError
from npattn.train.figures import check_replaceable

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _plot(fmt):
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    out = io.BytesIO()
    fig.savefig(out, format=fmt)
    plt.close(fig)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg", "eps", "ps"])
def test_an_earlier_plot_is_replaced(tmp_path, fmt):
    (tmp_path / f"p.{fmt}").write_bytes(_plot(fmt))
    check_replaceable(str(tmp_path / f"p.{fmt}"), f"p.{fmt}")


def _dvips_thesis():
    return (b"%!PS-Adobe-2.0\n%%Creator: dvips(k) 2023.1\n%%Title: paper.dvi\n%%EndComments\n(My thesis) show\n"
            b"%%BeginDocument: fig1.eps\n" + _plot("eps") + b"\n%%EndDocument\nshowpage\n%%EOF\n")  # fmt: skip


def _pdflatex_thesis():
    figure_info = (
        b"12 0 obj << /Creator (Matplotlib v3.8.0, https://matplotlib.org) "
        b"/Producer (Matplotlib pdf backend v3.8.0) >> endobj\n"
    )
    return (b"%PDF-1.5\n1 0 obj << /Type /Catalog >> endobj\n" + figure_info
            + b"20 0 obj << /Creator (LaTeX with hyperref) /Producer (pdfTeX-1.40.25) >> endobj\n"
            + b"trailer << /Root 1 0 R /Info 20 0 R >>\nstartxref\n0\n%%EOF\n")  # fmt: skip


def _annotated_plot():
    update = b"30 0 obj << /Creator (Preview) >> endobj\ntrailer << /Info 30 0 R /Prev 4442 >>\nstartxref\n9\n%%EOF\n"
    return _plot("pdf") + update


def _svg(title_where):
    creator = b"<dc:creator><cc:Agent><dc:title>Jane Doe</dc:title></cc:Agent></dc:creator>"
    work = {
        "title": b"<dc:title>Matplotlib v3 cheat sheet</dc:title>" + creator,
        "comment": b"<!-- <dc:title>Matplotlib v3 --><dc:title>Notes</dc:title>" + creator,
    }[title_where]
    return (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><metadata><rdf:RDF><cc:Work>' + work
            + b"</cc:Work></rdf:RDF></metadata><rect width=\"9\" height=\"9\"/></svg>\n")  # fmt: skip


def _svg_poster():
    own = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><g id="layer1">'
    return own + _plot("svg").split(b"?>", 1)[1].split(b"]>", 1)[-1] + b"</g></svg>\n"


@pytest.mark.parametrize(
    "make",
    [_dvips_thesis, _pdflatex_thesis, _annotated_plot, lambda: _svg("title"), lambda: _svg("comment"), _svg_poster],
)
def test_a_file_that_only_holds_matplotlibs_marker_is_refused(tmp_path, make):
    path = tmp_path / "mine"
    path.write_bytes(make())
    with pytest.raises(CheckpointError, match="is not an image matplotlib wrote"):
        check_replaceable(str(path), "mine")
