"""A run that saves repeatedly never replaces a file it did not write: a save path that holds,
since the run's last write (or since it started), a symlink (even to the run's own file), another
file, or the run's file modified, is refused (exit 2 / CheckpointError), left as it is, and the
message says which checkpoint is intact. A path that was removed holds no one's data: it is
written again."""

import os

import numpy as np
import pytest
from step_hooks import on_step

import npattn
from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train.lm_run import run_lm
from npattn.train.saveguard import SaveGuard
from npattn.train.text import default_corpus

_on_step = on_step


def _swap_in(path, new):
    """Put ``new`` (a file beside ``path``) at ``path`` with a rename, as ``mv`` does."""
    os.replace(new, path)


TRAIN = ["train", "--task", "teacher-student", "--steps", "8", "--save-every", "2", "--save"]


@pytest.fixture
def precious(tmp_path):
    path = tmp_path / "mine.npz"
    npattn.save({"precious": np.arange(5.0)}, path)
    return path, path.read_bytes()


def test_a_symlink_to_a_precious_file_planted_between_saves_is_refused(tmp_path, monkeypatch, capsys, precious):
    mine, data = precious
    ck = tmp_path / "run.npz"
    _on_step(monkeypatch, 5, lambda: (ck.unlink(), ck.symlink_to(mine.name)))  # after the save of step 4
    assert main([*TRAIN, str(ck)]) == 2
    err = capsys.readouterr().err
    assert mine.read_bytes() == data and ck.is_symlink()
    assert f"cannot write checkpoint '{ck}': it now holds a symlink to 'mine.npz'" in err
    assert "since this run last wrote it at step 4" in err
    assert err.endswith(f"The last checkpoint of this run, '{ck}', was written at step 4 and has been changed since by "
                        "someone else (its size, time or file replaced), so it may no longer hold that step.\n")


def test_a_symlink_to_the_runs_own_file_is_refused_too(tmp_path, monkeypatch, capsys):
    ck, own = tmp_path / "run.npz", tmp_path / "kept.npz"
    _on_step(monkeypatch, 5, lambda: (os.rename(ck, own), ck.symlink_to(own.name)))
    assert main([*TRAIN, str(ck)]) == 2
    assert "it now holds a symlink to 'kept.npz'" in capsys.readouterr().err
    assert ck.is_symlink() and npattn.load(own)["step"] == 4


def test_another_regular_file_moved_in_is_refused(tmp_path, monkeypatch, capsys, precious):
    _, data = precious
    ck = tmp_path / "run.npz"
    _on_step(monkeypatch, 5, lambda: (ck.with_suffix(".x").write_bytes(data), _swap_in(ck, ck.with_suffix(".x"))))
    assert main([*TRAIN, str(ck)]) == 2
    assert "it now holds another file" in capsys.readouterr().err
    assert ck.read_bytes() == data


def test_the_runs_file_rewritten_in_place_is_refused(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "run.npz"
    _on_step(monkeypatch, 5, lambda: ck.open("ab").write(b"appended by someone"))
    assert main([*TRAIN, str(ck)]) == 2
    assert "it now holds the file it last saw there, modified" in capsys.readouterr().err
    assert ck.read_bytes().endswith(b"appended by someone")


def test_a_file_that_appears_before_the_first_save_is_refused(tmp_path, monkeypatch, capsys, precious):
    _, data = precious
    ck = tmp_path / "run.npz"
    _on_step(monkeypatch, 1, lambda: ck.write_bytes(data))  # the path was empty when the run started
    assert main(["train", "--task", "teacher-student", "--steps", "4", "--save", str(ck)]) == 2
    err = capsys.readouterr().err
    assert "it now holds a file that was not there when the run started" in err
    assert err.endswith(f"This run wrote no checkpoint: '{ck}' changed during the run, but not by it.\n")
    assert ck.read_bytes() == data


def test_two_runs_with_the_same_save_path(tmp_path, monkeypatch):
    """The other run's save lands between two saves of this one: this one stops, the other's file stays."""
    ck = tmp_path / "run.npz"
    other = tmp_path / "other.npz"
    npattn.train_task("teacher-student", steps=2, save=other)
    _on_step(monkeypatch, 5, lambda: (ck.with_suffix(".x").write_bytes(other.read_bytes()),
                                      _swap_in(ck, ck.with_suffix(".x"))))
    with pytest.raises(CheckpointError, match="it now holds another file, put there since this run last wrote it"):
        npattn.train_task("teacher-student", steps=8, save=ck, save_every=2)
    assert ck.read_bytes() == other.read_bytes()


def test_a_removed_target_is_written_again(tmp_path, monkeypatch):
    ck = tmp_path / "run.npz"
    _on_step(monkeypatch, 5, ck.unlink)
    npattn.train_task("teacher-student", steps=8, save=ck, save_every=2)
    assert npattn.load(ck)["step"] == 8


def test_a_resumed_checkpoint_saved_over_and_a_save_path_given_as_a_symlink_still_save(tmp_path):
    ck = tmp_path / "run.npz"
    npattn.train_task("teacher-student", steps=2, save=ck)
    npattn.train_task("teacher-student", steps=6, save=ck, save_every=2, resume=ck)
    assert npattn.load(ck)["step"] == 6
    link = tmp_path / "link.npz"
    link.symlink_to(ck.name)
    npattn.train_task("teacher-student", steps=8, save=link, save_every=2, resume=link)
    assert link.is_symlink() and npattn.load(ck)["step"] == 8


def test_the_lm_run_is_guarded(tmp_path, monkeypatch, precious):
    mine, data = precious
    text = tmp_path / "small.txt"
    text.write_text(default_corpus()[:6_000], encoding="utf-8")
    ck = tmp_path / "lm.npz"
    settings = {"tokenizer": "char", "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
                "batch_size": 4, "eval_every": 100, "eval_iter": 1, "sample_tokens": 1, "text": str(text),
                "steps": 6}  # fmt: skip
    _on_step(monkeypatch, 3, lambda: (ck.unlink(), ck.symlink_to(mine.name)))  # after the save of step 2
    with pytest.raises(CheckpointError, match=r"it now holds a symlink to 'mine\.npz'"):
        run_lm(settings, save=ck, save_every=2, out=None)
    assert mine.read_bytes() == data


def test_the_guard_costs_one_lstat_and_names_nothing_when_unchanged(tmp_path):
    ck = tmp_path / "a.npz"
    guard = SaveGuard(ck)
    guard.check()  # nothing there, nothing written: fine
    npattn.save({"x": np.zeros(2)}, ck)
    with pytest.raises(CheckpointError, match="a file that was not there when the run started"):
        guard.check()
