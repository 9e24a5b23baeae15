"""What a language-model run refuses, and when: every setting, target, text and resumed checkpoint
entry is checked before any work (nothing printed, no model built, no step taken), with an npattn
error naming the entry, never a raw traceback or a run whose result is lost at the end."""

import io
import os

import pytest
from training_bad_inputs import LM_TINY, edited_copy

import npattn.train.lm_run as lm_run
from npattn.cli.main import main
from npattn.errors import CheckpointError, ConfigError
from npattn.train.lm import train_lm
from npattn.train.lm_run import run_lm
from npattn.train.text import create_dataloader_v1, default_corpus

TINY = {k: v for k, v in LM_TINY.items() if k != "text"}  # a tiny GPT on a char vocabulary


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "small.txt"
    path.write_text(default_corpus()[:3_000], encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def step3(tmp_path_factory, text_file):
    """A checkpoint after 3 steps."""
    path = tmp_path_factory.mktemp("ck") / "run.npz"
    run_lm({**TINY, "text": text_file, "steps": 3}, save=path, out=None)
    return path


@pytest.fixture
def no_model(monkeypatch):
    """Building the model fails the test: the refusal must come before it."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was built before the refusal")

    monkeypatch.setattr(lm_run, "GPTModel", refuse)


def _refused(error, message, *args, **kwargs) -> None:
    out = io.StringIO()
    with pytest.raises(error, match=message):
        run_lm(*args, out=out, **kwargs)
    assert out.getvalue() == "", "printed before the refusal"


def test_targets_are_checked_before_any_work(tmp_path, text_file, no_model, monkeypatch) -> None:
    settings = {**TINY, "text": text_file}
    monkeypatch.chdir(tmp_path)
    os.mkdir("adir")
    _refused(CheckpointError, r"folder .*nodir' does not exist", settings, save="nodir/x.npz")
    _refused(ConfigError, r"save_every=1 needs a save path", settings, save_every=1)
    pytest.importorskip("matplotlib")
    _refused(ConfigError, r"--plot 'x.txt': matplotlib cannot write .txt files", settings, plot="x.txt")
    _refused(CheckpointError, r"folder .*nodir' does not exist", settings, plot="nodir/x.png")
    _refused(CheckpointError, "cannot write plot 'adir': it is a directory", settings, plot="adir")
    assert not os.path.exists("adir.png")


def test_python_entry_points_name_expected_and_actual(text_file, no_model) -> None:
    _refused(ConfigError, r"unknown setting\(s\) foo; LMSettings has text, ", {**TINY, "foo": 1})
    _refused(ConfigError, r"text \(--text\) must be a file path \(str\) or None, got int", {"text": 3})
    _refused(ConfigError, "run_lm's settings must be a dict of LMSettings fields, got list", [1])
    with pytest.raises(ConfigError, match=r"out must be a text stream .* got str"):
        run_lm(TINY, out="x")
    _refused(
        ConfigError, r"top_k \(--top-k\) 100000 exceeds the vocabulary of", {**TINY, "text": text_file, "top_k": 100000}
    )
    _refused(
        ConfigError,
        r"prompt \(--prompt\) '\u2603': character '\u2603' \(U\+2603\) is not in",
        {**TINY, "text": text_file, "prompt": "\u2603"},
    )
    with pytest.raises(ConfigError, match=r"tokenizer must be a tokenizer with encode and decode .*got str 'gpt2'"):
        create_dataloader_v1("some text", tokenizer="gpt2")
    with pytest.raises(ConfigError, match=r"tokenizer must be a tokenizer with encode and decode .*got NoneType"):
        train_lm(None, None, None, None, 1, 1, 1, "The", None)


def _pop(key):
    return lambda d: d.pop(key)


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (lambda s: s.update(history=-5), CheckpointError, "the history must be a dict of"),
        (lambda s: s["history"].update(train_losses="abc"), CheckpointError, "history.train_losses must be a list"),
        (lambda s: s["history"].update(samples=[[1]]), CheckpointError, r"history.samples must be a list of \[global"),
        (lambda s: s["history"].pop("tokens_seen"), CheckpointError, r"missing \['tokens_seen'\]"),
        (lambda s: s.pop("model"), CheckpointError, r"missing \['model'\]"),
        (lambda s: s["history"].update(batch=10**9), CheckpointError, "history.batch 1000000000 is beyond the"),
        (lambda s: s["history"].update(epoch="x"), CheckpointError, "history.epoch must be a finite integer >= 0"),
        (lambda s: s["history"].update(global_step=-5), CheckpointError, "history.global_step must be a finite"),
        (lambda s: s["run"]["settings"].update(extra=1), CheckpointError, r"unexpected \['extra'\]"),
        (lambda s: s["run"]["settings"].pop("n_heads"), CheckpointError, r"missing \['n_heads'\]"),
        (lambda s: s["run"]["settings"].update(n_heads=3), CheckpointError, "holds a bad setting: emb_dim"),
        (lambda s: s.update(tokenizer="not json"), CheckpointError, "its tokenizer entry cannot be read"),
        (
            lambda s: s.update(tokenizer='{"kind": "bpe", "merges": [], "pattern": ""}'),
            CheckpointError,
            "split pattern",
        ),
        (lambda s: s["model"].pop("out_head.weight"), CheckpointError, "its model or optimizer entry does not fit"),
        (lambda s: s.update(dropout_rng=[{}]), CheckpointError, "its dropout_rng entry does not fit"),
    ],
)
def test_a_resumed_checkpoint_is_checked_whole_before_any_step(tmp_path, step3, text_file, edit, error, message):
    edited = edited_copy(step3, tmp_path, edit)
    _refused(error, message, {"text": text_file, "steps": 5}, resume=edited)


def test_resume_refuses_fewer_steps_than_the_checkpoint_holds(step3, text_file, no_model) -> None:
    _refused(
        ConfigError, "steps=1 is below the checkpoint's step count 3", {"text": text_file, "steps": 1}, resume=step3
    )


def test_cli_refuses_before_training(capsys, tmp_path, text_file, step3) -> None:
    small = ["--text", text_file, "--tokenizer", "char", "--context-length", "8", "--emb-dim", "8", "--n-heads", "2"]
    for args, message in [
        (["--save", str(tmp_path / "nodir" / "x.npz")], "does not exist"),
        (["--save-every", "1"], "save_every=1 needs a save path"),
        (["--top-k", "100000"], "exceeds the vocabulary"),
    ]:
        assert main(["train", "--task", "lm", *small, *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and message in captured.err and captured.err.count("\n") == 1
    assert main(["train", "--resume", str(step3), "--text", text_file, "--steps", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "steps=1 is below the checkpoint's step count 3" in captured.err
