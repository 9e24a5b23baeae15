"""Printing never costs a run its checkpoint, and odd places give one line: a console that cannot
encode the text (an ASCII stdout and a sample of "café"), --help to a full disk, a working folder
deleted under the command, a device named as a user file, an .npz under a .safetensors name, a
resumed text path the checkpoint stored relative to another folder."""

import os
import subprocess
import sys

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.train.lm_run import run_lm

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
LM = ["--task", "lm", "--tokenizer", "char", "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1",
      "--context-length", "8", "--batch-size", "2", "--eval-every", "1", "--eval-iter", "1",
      "--sample-tokens", "3"]  # fmt: skip


def _npattn(args, cwd, **env):
    return subprocess.run(
        [sys.executable, "-m", "npattn", *args], cwd=cwd, env={**ENV, **env}, capture_output=True, timeout=120
    )


def test_an_ascii_console_escapes_what_it_cannot_print_and_the_run_saves(tmp_path):
    (tmp_path / "t.txt").write_text("café au lait. " * 300, encoding="utf-8")
    args = ["train", *LM, "--text", "t.txt", "--steps", "2", "--prompt", "é", "--save", "lm.npz"]
    done = _npattn(args, tmp_path, PYTHONIOENCODING="ascii")
    assert done.returncode == 0, done.stderr
    assert b"\\xe9" in done.stdout and b"Traceback" not in done.stderr
    assert int(npattn.load(tmp_path / "lm.npz")["history"]["global_step"]) == 1
    done = _npattn(["train", "--steps", "2", "--save", "é.npz"], tmp_path, PYTHONIOENCODING="ascii")
    assert done.returncode == 0 and b"saved \\xe9.npz" in done.stdout
    assert (tmp_path / "é.npz").is_file()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["check", "-h"]])
def test_help_to_a_full_disk_is_one_line_and_exit_2(tmp_path, args):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "npattn", *args], stdout=full, stderr=subprocess.PIPE, env=ENV, timeout=60
        )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "npattn: error: cannot write to standard output: No space left on device"


def test_a_deleted_working_folder_is_one_line_and_exit_2(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]);"
        "from npattn.cli.main import main; sys.exit(main(['train', '--steps', '2', '--save', 'r.npz']))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(gone)], env=ENV, capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert b"the working folder no longer exists" in done.stderr and b"Traceback" not in done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_as_the_user_file_is_named_as_one():
    from npattn.debug.usercode import load_attention

    with pytest.raises(ConfigError, match=r"not a regular file .*: '/dev/zero'"):
        load_attention("/dev/zero:f")


def test_an_npz_under_a_safetensors_name_is_named(tmp_path):
    pytest.importorskip("safetensors")
    np.savez(tmp_path / "w.npz", w=np.zeros(3))
    os.rename(tmp_path / "w.npz", tmp_path / "w.safetensors")
    with pytest.raises(CheckpointError, match=r"starts like a zip file"):
        npattn.load(tmp_path / "w.safetensors")


def test_a_relative_stored_text_path_is_explained_on_resume(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    (tmp_path / "a" / "t.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    tiny = {"text": "t.txt", "tokenizer": "char", "emb_dim": 8, "n_heads": 2, "n_layers": 1, "context_length": 8,
            "batch_size": 2, "eval_every": 1, "eval_iter": 1, "sample_tokens": 2, "steps": 2}  # fmt: skip
    run_lm(tiny, save=str(tmp_path / "r.npz"), out=None)
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(ConfigError, match=r"the --text the checkpoint stored; a relative one is read from the current"):
        run_lm({"steps": 3}, resume=str(tmp_path / "r.npz"), out=None)


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"]])
def test_help_with_stdout_closed_is_one_line_and_exit_2(args):
    done = subprocess.run([sys.executable, "-m", "npattn", *args], stdout=subprocess.DEVNULL, env=ENV,
                          stderr=subprocess.PIPE, timeout=60, preexec_fn=lambda: os.close(1))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "npattn: error: cannot write to standard output: it is closed"
