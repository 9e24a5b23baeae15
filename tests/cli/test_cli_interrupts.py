"""Ctrl-C during ``npattn train``: one line saying the step reached and what the last checkpoint
holds, exit code 130, no traceback; an interrupt inside a checkpoint write leaves the old file
intact and no temporary file."""

import os

import pytest

import npattn
from npattn.cli.main import main
from npattn.optim import Optimizer

LM = ["--task", "lm", "--tokenizer", "char", "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1",
      "--context-length", "8", "--batch-size", "2", "--eval-every", "2", "--eval-iter", "1"]  # fmt: skip


def _interrupt_on_call(monkeypatch, owner, name, call):
    original, calls = getattr(owner, name), []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The quick brown fox jumps over the lazy dog. " * 40)
    return str(path)


@pytest.mark.parametrize("lm", [False, True])
def test_ctrl_c_in_a_step_prints_one_line_and_exits_130(tmp_path, capsys, monkeypatch, text, lm):
    ck = tmp_path / "run.npz"
    args = [*LM, "--text", text] if lm else ["--task", "teacher-student"]
    _interrupt_on_call(monkeypatch, Optimizer, "step", 6)  # during step 6: steps 2 and 4 are saved
    assert main(["train", *args, "--steps", "8", "--save", str(ck), "--save-every", "2"]) == 130
    err = capsys.readouterr().err
    assert err == f"npattn train: interrupted at step 5; the last checkpoint '{ck}' holds step 4\n"
    saved = npattn.load(ck)
    assert (int(saved["history"]["global_step"]) + 1 if lm else int(saved["step"])) == 4


def test_ctrl_c_before_any_checkpoint_says_none_was_written(tmp_path, capsys, monkeypatch):
    _interrupt_on_call(monkeypatch, Optimizer, "step", 2)
    assert main(["train", "--task", "teacher-student", "--steps", "4", "--save", str(tmp_path / "r.npz")]) == 130
    err = capsys.readouterr().err
    ck = tmp_path / "r.npz"
    assert err == (
        f"npattn train: interrupted at step 1; no checkpoint was written: '{ck}' is as it was before the run\n"
    )
    _interrupt_on_call(monkeypatch, Optimizer, "step", 3)
    assert main(["train", "--task", "teacher-student", "--steps", "4"]) == 130
    assert capsys.readouterr().err.endswith("no checkpoint was written (no save path)\n")


@pytest.mark.parametrize("where", ["replace", "fsync"])
@pytest.mark.parametrize("lm", [False, True])
def test_ctrl_c_inside_a_checkpoint_write_keeps_the_old_file(tmp_path, capsys, monkeypatch, text, where, lm):
    ck = tmp_path / "run.npz"
    args = [*LM, "--text", text] if lm else ["--task", "teacher-student"]
    assert main(["train", *args, "--steps", "2", "--save", str(ck)]) == 0
    before = ck.read_bytes()
    _interrupt_on_call(monkeypatch, os, where, 1)
    assert main(["train", *args, "--steps", "4", "--save", str(ck), "--save-every", "2"]) == 130
    monkeypatch.undo()
    assert capsys.readouterr().err.startswith(f"npattn train: interrupted at step 2; no checkpoint was written: '{ck}'")
    assert ck.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["run.npz", "t.txt"]  # no temporary file left
