"""Messages that named the wrong cause: ``--d-in`` above its ceiling was told "trace keeps every n x n
stage" (n is --tokens); ``--save -x.npz`` got argparse's "expected one argument" with no way on;
``--resume`` of a plain state dict did not say what the file is likely to be."""

import numpy as np

import npattn
from npattn.cli.main import main


def test_d_in_above_its_ceiling_does_not_blame_the_tokens(capsys):
    assert main(["trace", "--d-in", "99999"]) == 2
    err = capsys.readouterr().err
    assert "--d-in: must be at most 4096, got 99999" in err and "n x n" not in err


def test_a_value_starting_with_a_dash_says_how_to_give_it(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--save", "-x.npz"]) == 2
    assert "(a value that starts with '-' is given as --save=VALUE)" in capsys.readouterr().err
    assert main(["train", "--steps", "0", "--save=-x.npz"]) == 0 and (tmp_path / "-x.npz").exists()


def test_resuming_a_state_dict_says_what_it_is(capsys, tmp_path):
    npattn.save({"w": np.ones(2)}, tmp_path / "m.npz")
    assert main(["train", "--resume", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert "is not a training checkpoint (no 'run'/'step' entries: a state dict saved with npattn.save?)" in err


def test_no_dash_hint_when_no_value_was_given(capsys):
    for argv in (["train", "--steps", "1", "--save"], ["train", "--save", "--steps", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "expected one argument" in err and "starts with '-'" not in err
