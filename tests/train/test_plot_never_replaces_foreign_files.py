"""A --plot path may hold nothing (no file, an empty one) or an image matplotlib wrote (a PNG, PDF,
SVG, EPS or PS names matplotlib in its Software/Creator entry: an earlier run's plot); any other
file is refused before any work, byte-identical afterwards."""

import io

import pytest

from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train.figures import check_replaceable, save_figure
from npattn.train.lm_run import run_lm

pytest.importorskip("matplotlib")


@pytest.mark.parametrize("name, data", [
    ("notes.png", b"my notes\n"),
    ("photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(100)),
    ("thesis.pdf", b"%PDF-1.7\n% written by hand\n"),
])  # fmt: skip
def test_demo_refuses_a_file_matplotlib_did_not_write(tmp_path, capsys, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    assert main(["demo", "--plot", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "holds a file that is not an image matplotlib wrote" in err
    assert "remove the file or choose another plot path" in err and out == ""
    assert path.read_bytes() == data


def test_run_lm_refuses_a_foreign_plot_before_printing_anything(tmp_path):
    path = tmp_path / "loss.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n someone's picture")
    out = io.StringIO()
    with pytest.raises(CheckpointError, match=r"--plot .*loss.png' holds a file that is not an image matplotlib"):
        run_lm({"steps": 1}, plot=path, out=out)
    assert out.getvalue() == "" and path.read_bytes() == b"\x89PNG\r\n\x1a\n someone's picture"


@pytest.mark.parametrize("ext", ["png", "pdf", "svg", "eps", "ps"])
def test_every_image_save_figure_writes_may_be_replaced(tmp_path, ext):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = str(tmp_path / f"fig.{ext}")
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    save_figure(fig, path)
    plt.close(fig)
    assert check_replaceable(path, path) is None


def test_a_demo_plot_replaces_an_empty_file_and_may_replace_its_own_plot(tmp_path, capsys):
    path = tmp_path / "fig.png"
    path.write_bytes(b"")
    assert main(["demo", "--plot", str(path)]) == 0
    capsys.readouterr()
    assert path.read_bytes() and check_replaceable(str(path), str(path)) is None  # a re-run replaces it
