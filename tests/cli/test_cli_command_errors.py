"""Unrecognized arguments are reported by the command they were given to (they were reported by
``npattn``, pointing at ``npattn --help``), and a resume on a text edited at the same length says so
(it said "(8000 characters) differs from the one ... (8000 characters)")."""

import pytest

from npattn.cli.main import main
from npattn.errors import ConfigError
from npattn.train.lm_run import run_lm
from npattn.train.text import default_corpus


@pytest.mark.parametrize("command", ["train", "trace", "demo"])
def test_unrecognized_arguments_name_the_command(command, capsys):
    assert main([command, "--bogus", "3"]) == 2
    err = capsys.readouterr().err
    assert err == f"npattn {command}: error: unrecognized arguments: --bogus 3 (see npattn {command} --help)\n"


@pytest.mark.parametrize("argv", [["--bogus"], ["--bogus", "train"]])
def test_unrecognized_arguments_before_the_command_name_npattn(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == "npattn: error: unrecognized arguments: --bogus (see npattn --help)\n"


def test_a_text_edited_at_the_same_length_is_named_so(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(default_corpus()[:2000], encoding="utf-8")
    tiny = {"tokenizer": "char", "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1, "batch_size": 2,
            "eval_iter": 1, "sample_tokens": 1, "steps": 1, "text": str(text)}
    run_lm(tiny, save=tmp_path / "run.npz", out=None)
    edited = default_corpus()[:2000]
    text.write_text(edited[:1000] + edited[1001] + edited[1000] + edited[1002:], encoding="utf-8")
    assert len(text.read_text(encoding="utf-8")) == 2000 and text.read_text(encoding="utf-8") != edited
    same = r"trained on \(2000 characters, as many as this one: an edit that kept the length; the checkpoint keeps"
    with pytest.raises(ConfigError, match=same):
        run_lm({"steps": 2}, resume=tmp_path / "run.npz", out=None)


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["train", "--steps", "0", "--save", "a.npz", "--save", "b.npz"], "--save"),
        (["train", "--steps", "0", "--lr=0.1", "--lr", "0.2"], "--lr"),
        (["trace", "--tokens", "4", "--tokens", "5"], "--tokens"),
    ],
)
def test_an_option_given_twice_is_refused(argv, option, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {option} is given more than once; give it once" in err and err.count("\n") == 1
    assert not (tmp_path / "a.npz").exists() and not (tmp_path / "b.npz").exists()
