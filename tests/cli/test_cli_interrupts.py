"""Ctrl-C during ``npattn train``: one line saying the step reached and what the last checkpoint
holds, exit code 130, no traceback; an interrupt inside a checkpoint write leaves the old file
intact and no temporary file. An unwritable standard output is one line and exit code 2."""

import errno
import io
import os
import subprocess
import sys

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
        f"npattn train: interrupted at step 1; no checkpoint was written: '{ck}' does not exist\n"
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


# ---------------------------------------------------------------------------------------------
# an unwritable standard output: one line on stderr and exit code 2; a closed pipe stays quiet


class _FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


COMMANDS = [["train", "--task", "teacher-student", "--steps", "3"], ["demo"], ["trace", "--book"]]


@pytest.mark.parametrize("argv", COMMANDS)
def test_an_unwritable_stdout_is_one_line_and_exit_2(capsys, monkeypatch, argv):
    monkeypatch.setattr(sys, "stdout", _FullDisk())
    assert main(argv) == 2
    message = "error: cannot write to standard output: No space left on device"
    assert capsys.readouterr().err == f"npattn {argv[0]}: {message}\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_dev_full_as_stdout_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "npattn", "trace", "--book"], stdout=full, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    message = "npattn trace: error: cannot write to standard output: No space left on device\n"
    assert (done.returncode, done.stderr) == (2, message)
