"""A whole language-model run on a tiny GPT: the loss falls, checkpoints resume exactly, the
tokenizer travels with the model, and every option of ``npattn train --task lm`` is checked."""

import re

import numpy as np
import pytest

from npattn.cli.main import main
from npattn.errors import CheckpointError, ConfigError
from npattn.train import checkpoint
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.text import default_corpus
from npattn.train.tokenizer_files import tokenizer_from_dict

TINY = {
    "tokenizer": "char",
    "context_length": 16,
    "emb_dim": 16,
    "n_heads": 2,
    "n_layers": 1,
    "batch_size": 4,
    "eval_every": 10,
    "eval_iter": 2,
    "sample_tokens": 8,
    "lr": 0.01,
}


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "small.txt"
    path.write_text(default_corpus()[:12_000], encoding="utf-8")
    return str(path)


def test_a_tiny_gpt_learns(text_file) -> None:
    model, tokenizer, history = run_lm({**TINY, "text": text_file, "steps": 40}, out=None)
    assert history.eval_steps == [-1, 0, 10, 20, 30, 39]
    assert history.train_losses[0] > np.log(tokenizer.vocab_size) - 0.5  # starts near uniform
    assert history.train_losses[-1] < history.train_losses[0] - 0.8
    assert history.val_losses[-1] < history.val_losses[0] - 0.6
    assert history.tokens_seen == 40 * 4 * 16
    assert [step for step, _ in history.samples] == [-1, 39] and history.samples[-1][1].startswith("The")
    assert model.out_head.weight.shape == (tokenizer.vocab_size, 16)


def test_checkpoint_resumes_exactly_with_its_tokenizer(text_file, tmp_path) -> None:
    settings = {**TINY, "text": text_file, "tokenizer": "bpe", "vocab_size": 300, "drop_rate": 0.1}
    straight_model, _, straight = run_lm({**settings, "steps": 24}, out=None)
    path = tmp_path / "run.npz"
    run_lm({**settings, "steps": 11}, save=path, out=None)
    saved = checkpoint.load(path)
    assert saved["run"]["task"] == "lm" and saved["history"]["global_step"] == 10
    assert tokenizer_from_dict(__import__("json").loads(saved["tokenizer"])).vocab_size == 300
    model, _, resumed = run_lm({"steps": 24}, resume=path, save=path, out=None)
    for (name, a), b in zip(model.state_dict().items(), straight_model.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=name)  # dropout masks and batches continue exactly
    assert resumed.eval_steps == [-1, 0, 10, 20, 23] and resumed.val_losses[-1] == straight.val_losses[-1]
    with pytest.raises(ConfigError, match=r"--emb-dim 32 \(checkpoint: 16\)"):
        run_lm({"emb_dim": 32}, resume=path, out=None)
    with pytest.raises(ConfigError, match=r"the text read from the default corpus .* differs from the one"):
        run_lm({"text": None}, resume=path, out=None)


def test_settings_are_checked() -> None:
    for bad, message in [
        ({"emb_dim": 0}, r"emb_dim \(--emb-dim\) must be a positive integer, got 0"),
        ({"emb_dim": 30, "n_heads": 4}, r"emb_dim \(--emb-dim\) 30 must be divisible by n_heads \(--n-heads\) 4"),
        ({"drop_rate": 1.0}, r"drop_rate \(--drop-rate\) must lie in \[0, 1\)"),
        ({"lr": -1.0}, r"lr \(--lr\) must be >= 0"),
        ({"temperature": float("inf")}, r"temperature \(--temperature\) must be a finite number"),
        ({"tokenizer": "word"}, "unknown tokenizer 'word'"),
        ({"tokenizer": "char", "vocab_size": 300}, "applies to the bpe tokenizer only"),
        ({"dtype": "float16"}, "must be float32 or float64"),
        ({"steps": 5, "epochs": 1}, "give --steps or --epochs, not both"),
        ({"prompt": ""}, "must be a non-empty text"),
        ({"top_k": 0}, r"top_k \(--top-k\) must be a positive integer"),
    ]:
        with pytest.raises(ConfigError, match=message):
            LMSettings(**bad)


def test_short_text_and_bad_paths(tmp_path, text_file) -> None:
    short = tmp_path / "short.txt"
    short.write_text("tiny text " * 5)
    first_90 = r"the training text \(the first 90% of the text: 45 tokens\) gives no batch of 4 windows of "
    with pytest.raises(ConfigError, match=first_90):
        run_lm({**TINY, "text": str(short)}, out=None)
    short.write_text("tiny text " * 10)
    with pytest.raises(
        ConfigError, match=r"the validation text \(the last 10%: 10 tokens\) is shorter than one window"
    ):
        run_lm({**TINY, "text": str(short)}, out=None)
    with pytest.raises(ConfigError, match=r"--save: a training checkpoint is an \.npz file"):
        run_lm({**TINY, "text": text_file}, save=tmp_path / "x.safetensors", out=None)
    (tmp_path / "other.npz").write_bytes(b"junk")
    with pytest.raises(CheckpointError):
        run_lm({}, resume=tmp_path / "other.npz", out=None)


def _cli(*args: str) -> list[str]:
    return ["train", "--task", "lm", *args]


def test_cli_trains_saves_resumes_and_plots(capsys, tmp_path, text_file) -> None:
    ck = tmp_path / "lm.npz"
    small = [
        "--text",
        text_file,
        "--tokenizer",
        "char",
        "--context-length",
        "16",
        "--emb-dim",
        "16",
        "--n-heads",
        "2",
        "--n-layers",
        "1",
        "--batch-size",
        "4",
        "--eval-every",
        "10",
        "--eval-iter",
        "2",
        "--sample-tokens",
        "8",
    ]
    assert main(_cli(*small, "--steps", "20", "--save", str(ck))) == 0
    out = capsys.readouterr().out
    assert "Ep 1 (before training): Train loss" in out and "Ep 1 (Step 000010): Train loss" in out
    assert "model: GPTModel(vocab " in out and "done: 20 steps, 1,280 tokens" in out and f"saved {ck}" in out
    # --resume alone finds the language-model run in the checkpoint
    assert main(["train", "--resume", str(ck), "--steps", "30", "--text", text_file]) == 0
    assert "Ep 1 (Step 000029)" in capsys.readouterr().out
    pytest.importorskip("matplotlib")
    assert (
        main(["train", "--resume", str(ck), "--steps", "30", "--text", text_file, "--plot", str(tmp_path / "c.png")])
        == 0
    )
    assert (tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (_cli("--emb-dim", "0"), "emb_dim (--emb-dim) must be a positive integer, got 0"),
        (_cli("--emb-dim", "x"), "argument --emb-dim: expected an integer (digits 0-9), got 'x'"),
        (_cli("--tokenizer", "words"), "argument --tokenizer: invalid choice: 'words'"),
        (_cli("--text", "/no/such/file.txt"), "text file '/no/such/file.txt' does not exist"),
        (_cli("--optimizer", "sgd"), "--task lm trains with AdamW (the book's), got --optimizer sgd"),
        (_cli("--log-every", "5"), "--log-every is for the attention tasks"),
        (_cli("--steps", "-1"), "argument --steps: must be an integer >= 0, got -1"),
        (_cli("--drop-rate", "1.5"), "drop_rate (--drop-rate) must lie in [0, 1), got 1.5"),
        (
            ["train", "--task", "selective-copy", "--text", "x.txt", "--emb-dim", "8"],
            "--text, --emb-dim: only for --task lm",
        ),
    ],
)
def test_cli_errors_are_one_line(capsys, args, message) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_plot_without_matplotlib(capsys, monkeypatch, tmp_path, text_file) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(_cli("--text", text_file, "--plot", str(tmp_path / "c.png"))) == 2
    assert "pip install 'npattn[plot]'" in capsys.readouterr().err


def test_resume_from_another_folder_names_the_text_read_and_the_relative_path(tmp_path, monkeypatch) -> None:
    from training_bad_inputs import LM_TINY

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "t.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    (tmp_path / "b" / "t.txt").write_text("Another text, another run, the same name for its file. " * 40)
    monkeypatch.chdir(tmp_path / "a")
    run_lm({**LM_TINY, "text": "t.txt", "steps": 1}, save=tmp_path / "run.npz", out=None)
    monkeypatch.chdir(tmp_path / "b")
    read = re.escape(repr(str(tmp_path / "b" / "t.txt")))
    with pytest.raises(ConfigError, match=f"the text read from {read} .*; the stored --text 't.txt' is relative"):
        run_lm({"steps": 2}, resume=tmp_path / "run.npz", out=None)
