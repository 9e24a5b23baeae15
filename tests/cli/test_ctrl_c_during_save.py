"""A real Ctrl-C (SIGINT) that lands inside a checkpoint save waits until the save and its record
are done: one line naming the step the file holds, exit code 130, no temporary file. Before, a
SIGINT inside the zip writer ended in a ValueError traceback (exit 1), and one after the replace
reported the step before."""

import os
import signal

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.train import atomic
from npattn.train.loop import Interrupted, Progress

LM = ["--task", "lm", "--tokenizer", "char", "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1",
      "--context-length", "8", "--batch-size", "2", "--eval-every", "100", "--eval-iter", "1"]  # fmt: skip


def _sigint_on_call(monkeypatch, owner, name, call):
    """The ``call``-th call of owner.name sends this process a SIGINT, then does its work."""
    original, calls = getattr(owner, name), []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            os.kill(os.getpid(), signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)


def _leftovers(folder, keep):
    return sorted(f for f in os.listdir(folder) if f != keep and f != "t.txt")


@pytest.mark.parametrize("where", ["zip", "replace"])
@pytest.mark.parametrize("lm", [False, True])
def test_sigint_inside_a_save_reports_what_the_file_holds(tmp_path, capsys, monkeypatch, where, lm):
    text = tmp_path / "t.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 40)
    ck = tmp_path / "r.npz"
    if where == "zip":  # the header array of the second save (step 4): inside the zip writer
        calls = []
        original = np.lib.format.write_array

        def write_array(f, arr, *args, **kwargs):
            calls.append(arr.dtype.kind)
            if arr.dtype.kind == "U" and calls.count("U") == 2:
                os.kill(os.getpid(), signal.SIGINT)
            return original(f, arr, *args, **kwargs)

        monkeypatch.setattr(np.lib.format, "write_array", write_array)
    else:  # the second save's file is in place, its record not yet made
        original_replace = os.replace
        replaces = []

        def replace(src, dst):
            original_replace(src, dst)
            replaces.append(dst)
            if len(replaces) == 2:
                os.kill(os.getpid(), signal.SIGINT)

        monkeypatch.setattr(atomic.os, "replace", replace)
    args = [*LM, "--text", str(text)] if lm else ["--task", "teacher-student"]
    assert main(["train", *args, "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 130
    err = capsys.readouterr().err
    assert err == f"npattn train: interrupted at step 4; the last checkpoint '{ck}' holds step 4\n"
    saved = npattn.load(ck)
    assert (int(saved["history"]["global_step"]) + 1 if lm else int(saved["step"])) == 4
    assert _leftovers(tmp_path, "r.npz") == []


def test_a_save_with_a_sigint_inside_completes_then_raises(tmp_path, monkeypatch):
    path = tmp_path / "w.npz"
    npattn.save({"w": np.zeros(3)}, path)
    _sigint_on_call(monkeypatch, np.lib.format, "write_array", 2)
    progress = Progress(7, str(path))
    with pytest.raises(Interrupted, match=r"interrupted at step 7; the last checkpoint .* holds step 7$"):
        with progress.interrupts():
            progress.record_save(7, lambda: npattn.save({"w": np.ones(3)}, path))
    np.testing.assert_array_equal(npattn.load(path)["w"], np.ones(3))
    assert _leftovers(tmp_path, "w.npz") == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failed_save_with_a_sigint_inside_reports_the_failure(tmp_path, monkeypatch):
    path = tmp_path / "w.npz"

    def refuse(src, dst):
        os.kill(os.getpid(), signal.SIGINT)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(npattn.errors.CheckpointError, match="No space left"):
        npattn.save({"w": np.ones(3)}, path)
    assert not path.exists() and _leftovers(tmp_path, "") == []
