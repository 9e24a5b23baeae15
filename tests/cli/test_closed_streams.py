"""A reader that goes away (``| head -1``) or a standard output closed by the shell (``>&-``) never
ends a training run with success and no checkpoint: the run trains to the end with its output
discarded and writes its checkpoints. The commands that only print end quietly (closed pipe) or
say in one line that there is nowhere to print (closed stdout, exit 2). An error is exit 2 also
when standard error is full or closed."""

import io
import os
import subprocess
import sys

import pytest

import npattn
from npattn.cli.main import main

LM = ["--task", "lm", "--tokenizer", "char", "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1",
      "--context-length", "8", "--batch-size", "2", "--eval-every", "2", "--eval-iter", "1",
      "--sample-tokens", "2"]  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


class _ReaderGone(io.StringIO):
    """A pipe whose reader left after the first ``keep`` writes."""

    def __init__(self, keep):
        super().__init__()
        self.keep = keep

    def write(self, text):
        if self.keep <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.keep -= 1
        return super().write(text)


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The quick brown fox jumps over the lazy dog. " * 40)
    return str(path)


def _step(path, lm):
    saved = npattn.load(path)
    return int(saved["history"]["global_step"]) + 1 if lm else int(saved["step"])


@pytest.mark.parametrize("lm", [False, True])
@pytest.mark.parametrize("every", [[], ["--save-every", "2"]])
def test_a_run_whose_reader_went_away_trains_to_the_end_and_saves(tmp_path, monkeypatch, capsys, text, lm, every):
    ck = tmp_path / "r.npz"
    args = [*LM, "--text", text] if lm else ["--task", "teacher-student", "--log-every", "1"]
    monkeypatch.setattr(sys, "stdout", _ReaderGone(keep=2))
    assert main(["train", *args, "--steps", "12", "--save", str(ck), *every]) == 0
    assert _step(ck, lm) == 12
    assert capsys.readouterr().err == ""


def test_a_run_whose_reader_went_away_still_reports_its_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ReaderGone(keep=0))
    assert main(["train", "--task", "teacher-student", "--steps", "12", "--lr", "1e300", "--log-every", "1",
                 "--save", str(tmp_path / "r.npz")]) == 2  # fmt: skip
    assert capsys.readouterr().err.startswith("npattn train: error: training stopped at step 1: the loss is nan")


def test_the_printing_commands_still_end_quietly_on_a_closed_pipe(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ReaderGone(keep=1))
    assert main(["trace", "--book"]) == 0
    assert capsys.readouterr().err == ""


def test_head_on_a_real_pipe_leaves_the_finished_checkpoint(tmp_path):
    # enough progress lines (about 90 kB) to fill the pipe: the run meets the closed pipe mid-way
    run = subprocess.Popen([sys.executable, "-m", "npattn", "train", "--task", "teacher-student", "--steps", "1500",
                            "--log-every", "1", "--save", "r.npz"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=ENV, cwd=tmp_path)  # fmt: skip
    assert run.stdout.readline().startswith(b"training SelfAttention_v1")
    run.stdout.close()
    assert run.wait(timeout=120) == 0
    assert run.stderr.read() == b""
    run.stderr.close()
    assert _step(tmp_path / "r.npz", lm=False) == 1500


def _shell(command, tmp_path):
    line = f"{sys.executable} -m npattn {command}"
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)


def test_a_closed_stdout_runs_train_to_the_end(tmp_path):
    done = _shell("train --task teacher-student --steps 3 --save r.npz >&-", tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert _step(tmp_path / "r.npz", lm=False) == 3


def test_a_closed_stdout_is_one_line_and_exit_2_for_a_printing_command(tmp_path):
    done = _shell("book >&-", tmp_path)
    message = "npattn book: error: standard output is closed, nothing can be printed "
    message += "(redirect it to a file or /dev/null)\n"
    assert (done.returncode, done.stderr) == (2, message)


@pytest.mark.parametrize("stderr", ["2>&-"] + (["2>/dev/full"] if os.path.exists("/dev/full") else []))
def test_an_error_is_exit_2_when_stderr_cannot_be_written(tmp_path, stderr):
    done = _shell(f"train --task teacher-student --lr nan {stderr}", tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", "")
