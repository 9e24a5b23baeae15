"""A save target removed or replaced by someone else during a run (the folder deleted, the file
replaced by a directory, another file or a symlink to /dev/null): the message that stops the run
says the last checkpoint was written but is no longer there, never that the path holds its step."""

import os
import shutil

import pytest
from step_hooks import on_step

from npattn.cli.main import main

_on_step = on_step


def _interrupt():
    raise KeyboardInterrupt


def _replace_by(kind, path):
    def act():
        os.remove(path)
        if kind == "directory":
            os.mkdir(path)
        elif kind == "symlink to /dev/null":
            os.symlink(os.devnull, path)
        elif kind == "another file":
            path.write_bytes(b"not the run's checkpoint")
    return act


GONE = "was written at step 4 but is no longer there (removed since)"
CHANGED = (
    "was written at step 4 and has been changed since by someone else (its size, time or file replaced), so it may "
    "no longer hold that step"
)


@pytest.mark.parametrize("kind", ["directory", "symlink to /dev/null", "folder removed"])
def test_a_failed_save_does_not_claim_a_file_that_is_gone(tmp_path, monkeypatch, capsys, kind):
    folder = tmp_path / "runs"
    folder.mkdir()
    ck = folder / "r.npz"
    act = (lambda: shutil.rmtree(folder)) if kind == "folder removed" else _replace_by(kind, ck)
    _on_step(monkeypatch, 5, act)  # after the save of step 4; the save of step 6 fails
    assert main(["train", "--task", "teacher-student", "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npattn train: error: cannot write checkpoint")
    assert err.endswith(f"The last checkpoint of this run, '{ck}', {GONE if kind == 'folder removed' else CHANGED}.\n")


@pytest.mark.parametrize("kind", ["directory", "another file"])
def test_ctrl_c_does_not_claim_a_file_that_is_gone(tmp_path, monkeypatch, capsys, kind):
    ck = tmp_path / "r.npz"
    replace = _replace_by(kind, ck)
    _on_step(monkeypatch, 6, lambda: (replace(), _interrupt()))
    assert main(["train", "--task", "teacher-student", "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 130
    assert capsys.readouterr().err == f"npattn train: interrupted at step 5; the last checkpoint '{ck}' {CHANGED}\n"


def test_a_file_still_there_is_reported_with_its_step(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "r.npz"
    _on_step(monkeypatch, 5, lambda: os.chmod(ck, 0o444))  # read-only: the save of step 6 is refused
    assert main(["train", "--task", "teacher-student", "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 2
    assert capsys.readouterr().err.endswith(f"The last checkpoint of this run, '{ck}', holds step 4.\n")


def test_no_checkpoint_yet_and_a_target_changed_by_someone_else_is_not_as_before(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "r.npz"
    _on_step(monkeypatch, 3, lambda: ck.mkdir())  # no checkpoint before the end; the final save fails
    assert main(["train", "--task", "teacher-student", "--steps", "4", "--save", str(ck)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"This run wrote no checkpoint: '{ck}' changed during the run, but not by it.\n")


def test_no_checkpoint_yet_and_an_untouched_target_is_as_before(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "r.npz"
    _on_step(monkeypatch, 3, _interrupt)
    assert main(["train", "--task", "teacher-student", "--steps", "4", "--save", str(ck)]) == 130
    message = f"interrupted at step 2; no checkpoint was written: '{ck}' does not exist"
    assert capsys.readouterr().err == f"npattn train: {message}\n"


def test_a_file_replaced_right_after_the_write_is_not_taken_for_it(tmp_path, monkeypatch, capsys):
    """The file written is known by its descriptor's stat: a directory put in its place between the
    rename and the record (moved aside, a folder made) is not what the message says holds the step."""
    from npattn.train import checkpoint

    ck = tmp_path / "r.npz"
    original, saves = checkpoint.save_run, []

    def save_run(*args, **kwargs):
        written = original(*args, **kwargs)
        saves.append(1)
        if len(saves) == 2:  # the save of step 4: moved aside and a directory made in its place
            os.replace(ck, tmp_path / "moved.npz")
            os.mkdir(ck)
        return written

    monkeypatch.setattr(checkpoint, "save_run", save_run)
    _on_step(monkeypatch, 6, _interrupt)
    assert main(["train", "--task", "teacher-student", "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 130
    assert capsys.readouterr().err == f"npattn train: interrupted at step 5; the last checkpoint '{ck}' {CHANGED}\n"
