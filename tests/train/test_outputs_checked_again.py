"""Two ways a run replaced a file it did not write: a plot path that something was put at while the
run trained (a symlink to the run's own checkpoint or to a user's file, a copied PDF) was written
over after the checks at the start; and a save path holding a file with a run checkpoint's entry
names (run, model, optimizer, history, digest) was replaced though its digest did not match (a
user's file, or a run checkpoint with an entry added)."""

import os

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError
from npattn.train import train_task
from npattn.train.figures import save_figure

PLANTED = ["symlink to a checkpoint", "symlink to notes", "copied pdf", "text naming matplotlib"]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_plot_path_changed_during_the_run_is_refused_and_kept(tmp_path, planted):
    plt = pytest.importorskip("matplotlib.pyplot")
    train_task("teacher-student", steps=2, save=str(tmp_path / "r.npz"), log_every=0)
    (tmp_path / "notes.txt").write_text("precious")
    plot = tmp_path / "p.png"
    fig = plt.figure()
    try:
        # the checks at the start found nothing at p.png; then, while the run trained:
        if planted == "symlink to a checkpoint":
            os.symlink(tmp_path / "r.npz", plot)
        elif planted == "symlink to notes":
            os.symlink(tmp_path / "notes.txt", plot)
        elif planted == "copied pdf":
            plot.write_bytes(b"%PDF-1.7 a user's thesis")
        else:  # names matplotlib, but is no image: a user's notes, kept
            plot.write_bytes(b"my thesis on matplotlib, not a matplotlib file")
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        with pytest.raises(CheckpointError, match=r"--plot .*p\.png' holds a file that is not an image matplotlib"):
            save_figure(fig, str(plot))
    finally:
        plt.close(fig)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    npattn.load(str(tmp_path / "r.npz"))  # the checkpoint still loads


def test_a_save_path_with_a_run_checkpoints_names_but_not_its_digest_is_refused(tmp_path):
    mine = tmp_path / "mine.npz"
    npattn.save({"run": "notes", "model": {}, "optimizer": {}, "history": [], "digest": "x", "thesis": "precious"},
                str(mine))  # fmt: skip
    before = mine.read_bytes()
    with pytest.raises(CheckpointError, match=r"holds a file with a training run's entries that no run wrote as it is"):
        train_task("teacher-student", steps=2, save=str(mine), log_every=0)
    assert mine.read_bytes() == before


def test_a_run_checkpoint_with_an_entry_added_is_refused_and_a_real_one_replaced(tmp_path):
    run = tmp_path / "run.npz"
    train_task("teacher-student", steps=2, save=str(run), log_every=0)
    extended = tmp_path / "x.npz"
    npattn.save(dict(npattn.load(str(run)), mydata=np.arange(5)), str(extended))
    before = extended.read_bytes()
    with pytest.raises(CheckpointError, match="changed after the run wrote it"):
        train_task("teacher-student", steps=2, save=str(extended), log_every=0)
    assert extended.read_bytes() == before
    train_task("teacher-student", steps=3, save=str(run), log_every=0)  # another run's real checkpoint: replaced
    assert npattn.load(str(run))["step"] == 3
