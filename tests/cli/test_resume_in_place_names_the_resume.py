"""Resuming in place (``--resume F --save F``) from a bad F: the save-target check ran first, so the
message blamed --save and said to remove the very checkpoint being resumed. The resume is read
first now, and its own message names what is wrong with it."""

import npattn
from npattn.cli.main import main


def test_an_edited_checkpoint_is_named_as_the_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--steps", "4", "--save", "e1.npz"]) == 0
    state = npattn.load("e1.npz")
    state["step"] = float(state["step"])
    npattn.save(state, "e1.npz")
    capsys.readouterr()
    assert main(["train", "--resume", "e1.npz", "--save", "e1.npz", "--steps", "8"]) == 2
    err = capsys.readouterr().err
    assert "'e1.npz' was changed after the run wrote it" in err and "--save" not in err and "remove" not in err


def test_a_corrupt_file_is_named_as_the_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.npz").write_bytes(b"not a checkpoint at all")
    assert main(["train", "--resume", "bad.npz", "--save", "bad.npz", "--steps", "8"]) == 2
    err = capsys.readouterr().err
    assert "'bad.npz' is truncated, corrupt or not a checkpoint" in err and "--save" not in err
