"""Files a run reads and writes: no output may be an input or another output (also through a
symlink or a hard link), read-only files and folders are refused by their mode bits (as root too),
a path ending in a separator is a folder, the index's class and config are the checkpoint's own,
and any corrupt byte of the zip directory is a CheckpointError."""

import os

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.train.lm_run import run_lm
from npattn.train.text import default_corpus

TINY = {"tokenizer": "char", "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1, "batch_size": 16}


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = default_corpus()[:3_000]
    for name in ("c.txt", "c.npz", "c.png"):
        (tmp_path / name).write_text(text, encoding="utf-8")
    return text


def _run(text="c.txt", **kwargs):
    return run_lm({**TINY, "steps": 2, "text": text}, out=None, **kwargs)


@pytest.mark.parametrize(
    "text,kwargs,message",
    [
        ("c.npz", {"save": "c.npz"}, "save (--save) 'c.npz' is the file the run reads as text (--text) 'c.npz'"),
        ("c.png", {"plot": "c.png"}, "plot (--plot) 'c.png' is the file the run reads as text (--text) 'c.png'"),
        ("c.txt", {"save": "o.npz", "plot": "o.png"}, "plot (--plot) 'o.png' is the file the run writes as save"),
        ("c.txt", {"save": "link.npz"}, "save (--save) 'link.npz' is the file the run reads as text"),
        ("c.txt", {"save": "hard.npz"}, "save (--save) 'hard.npz' is the file the run reads as text"),
    ],
)
def test_no_output_is_an_input_or_another_output(corpus, text, kwargs, message):
    if "plot" in kwargs:
        pytest.importorskip("matplotlib")
    os.symlink("c.txt", "link.npz")
    os.link("c.txt", "hard.npz")
    os.symlink("o.npz", "o.png")  # dangling: both outputs would land in o.npz
    with pytest.raises(npattn.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(text, **kwargs)
    for name in ("c.txt", "c.npz", "c.png"):
        assert open(name, encoding="utf-8").read() == corpus, f"{name} was changed"
    assert not os.path.exists("o.npz")


def test_the_cli_refuses_saving_over_its_text_in_one_line(corpus, capsys):
    argv = ["train", "--task", "lm", "--text", "c.npz", "--save", "c.npz", "--steps", "2"]
    argv += ["--tokenizer", "char", "--context-length", "8", "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is the file the run reads as text (--text)" in err
    assert open("c.npz", encoding="utf-8").read() == corpus


def test_a_resumed_run_may_save_over_its_own_checkpoint_but_not_plot_over_it(corpus):
    _run(save="run.npz")
    pytest.importorskip("matplotlib")
    with pytest.raises(npattn.ConfigError, match=r"plot .* is the file the run reads as resume"):
        os.symlink("run.npz", "run.png")
        run_lm({"steps": 3}, out=None, resume="run.npz", plot="run.png")
    run_lm({"steps": 3}, out=None, resume="run.npz", save="run.npz")  # documented resuming
    assert npattn.load("run.npz")["history"]["global_step"] == 2


@pytest.mark.parametrize("folder", [False, True])
def test_read_only_by_mode_bits_is_refused_even_for_root(tmp_path, folder):
    path = tmp_path / "f.npz"
    npattn.save({"w": np.arange(3.0)}, path)
    os.chmod(tmp_path if folder else path, 0o555 if folder else 0o444)
    try:
        where = "in the folder" if folder else r"\(the file is read-only\)"
        with pytest.raises(npattn.CheckpointError, match=f"permission denied {where}"):
            npattn.save({"w": np.zeros(3)}, path)
        with pytest.raises(npattn.CheckpointError, match="permission denied"):
            npattn.train_task("teacher-student", steps=2, save=path)
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)
    np.testing.assert_array_equal(npattn.load(path)["w"], np.arange(3.0))


def test_a_path_ending_in_a_separator_is_refused(tmp_path):
    with pytest.raises(npattn.CheckpointError, match="ends in a separator"):
        npattn.save({"a": np.ones(2)}, f"{tmp_path}/x.npz/")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("key", ["class", "config"])
def test_metadata_cannot_set_the_class_or_config(tmp_path, key):
    with pytest.raises(npattn.CheckpointError, match=rf"metadata keys \['{key}'\] are reserved"):
        npattn.save(npattn.SelfAttention_v1(3, 2), tmp_path / "c.npz", metadata={key: "GPTModel"})
    npattn.save(npattn.SelfAttention_v1(3, 2), tmp_path / "c.npz", metadata={"note": "x"})
    meta = npattn.load_metadata(tmp_path / "c.npz")
    assert meta["class"] == "SelfAttention_v1" and meta["config"] == {"d_in": 3, "d_out": 2} and meta["note"] == "x"


def test_every_flipped_byte_of_the_zip_directory_is_a_checkpoint_error(tmp_path):
    good = tmp_path / "x.npz"
    npattn.save({"a": np.arange(2.0)}, good)
    data = good.read_bytes()
    start = data.index(b"PK\x01\x02")
    bad = tmp_path / "bad.npz"
    for i in range(start, len(data)):
        for mask in (0x5A, 0xFF):
            flipped = bytearray(data)
            flipped[i] ^= mask
            bad.write_bytes(bytes(flipped))
            try:
                np.testing.assert_array_equal(npattn.load(bad)["a"], np.arange(2.0))
            except npattn.CheckpointError:
                pass
    flipped = bytearray(data)
    flipped[start + 6] ^= 0x5A  # "version made by": the first that escaped as NotImplementedError
    bad.write_bytes(bytes(flipped))
    with pytest.raises(npattn.CheckpointError, match="truncated, corrupt or not a checkpoint: NotImplementedError"):
        npattn.load(bad)
