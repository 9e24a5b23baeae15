"""A plot path is watched from the start of the run to the write, as a save path is: what was put
there since (a symlink to another matplotlib image, another plot copied over it) is refused and
left as it is, even though it holds an image matplotlib wrote; what was there at the start (an
earlier plot of the same path) is replaced."""

import io
import os
import shutil

import pytest

from npattn.errors import CheckpointError
from npattn.train.figures import save_figure
from npattn.train.saveguard import SaveGuard


def _plot_file(plt, path) -> bytes:
    fig = plt.figure()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path.read_bytes()


@pytest.mark.parametrize("planted", ["symlink to another plot", "another plot copied over it", "a plot where none was"])
def test_another_plot_put_at_the_path_during_the_run_is_kept(tmp_path, planted):
    plt = pytest.importorskip("matplotlib.pyplot")
    plot, other = tmp_path / "p.png", tmp_path / "other.png"
    other_bytes = _plot_file(plt, other)
    if planted != "a plot where none was":
        _plot_file(plt, plot)  # an earlier run's plot: the path held it when this run started
    guard = SaveGuard(str(plot), "plot")
    # while the run trained:
    if planted == "symlink to another plot":
        os.remove(plot)
        os.symlink(other, plot)
    else:
        shutil.copyfile(other, str(plot) + ".new")
        os.replace(str(plot) + ".new", plot)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fig = plt.figure()
    try:
        refused = r"cannot write plot .*p\.png': it now holds .* put there since the run"
        with pytest.raises(CheckpointError, match=refused):
            save_figure(fig, str(plot), guard)
    finally:
        plt.close(fig)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert other.read_bytes() == other_bytes


def test_the_plot_there_at_the_start_is_replaced(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    plot = tmp_path / "p.png"
    old = _plot_file(plt, plot)
    guard = SaveGuard(str(plot), "plot")
    fig = plt.figure(figsize=(3, 2))
    try:
        save_figure(fig, str(plot), guard)
    finally:
        plt.close(fig)
    assert plot.read_bytes() != old and plot.read_bytes().startswith(b"\x89PNG")


def test_the_demo_watches_its_plot_path(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from npattn.cli import demo

    plot, other = tmp_path / "p.png", tmp_path / "other.png"
    real_fit = demo.fit

    def fit_then_plant(*args, **kwargs):
        history = real_fit(*args, **kwargs)
        other.write_bytes(b"\x89PNG\r\n\x1a\n matplotlib image of the user's")
        os.symlink(other, plot)
        return history

    monkeypatch.setattr(demo, "fit", fit_then_plant)
    with pytest.raises(CheckpointError, match="put there since the run started"):
        demo.run_demo(io.StringIO(), plot=str(plot), steps=2)
    assert other.read_bytes() == b"\x89PNG\r\n\x1a\n matplotlib image of the user's"
