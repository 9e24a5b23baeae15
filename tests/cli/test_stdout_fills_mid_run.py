"""Standard output that fills up while a run trains (a log on a disk that fills) stopped the run
with exit 2 and no checkpoint, its progress lost; the run now goes on without its output, writes
its checkpoints as asked, and then reports the refusal (exit 2). Refused from the first line
(`> /dev/full`), it still stops before any step. Abbreviated options are not taken either (``--step
3`` after ``--steps 2`` was one more --steps, the last kept)."""

import errno
import io

import pytest

import npattn
from npattn.cli.main import main


class FillingStream(io.StringIO):
    """A text stream that refuses every write after ``room`` characters, as a full disk does."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(text)


@pytest.mark.parametrize("task", ["selective-copy"])
def test_a_run_whose_output_fills_up_trains_to_the_end_and_saves(tmp_path, monkeypatch, capsys, task):
    path = str(tmp_path / "r.npz")
    monkeypatch.setattr("sys.stdout", FillingStream(room=400))
    assert main(["train", "--task", task, "--steps", "40", "--log-every", "1", "--save", path]) == 2
    err = capsys.readouterr().err
    assert "cannot write to standard output: No space left on device; the run went on without printing" in err
    assert npattn.load(path)["step"] == 40


def test_output_refused_from_the_start_stops_before_any_step(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.npz"
    monkeypatch.setattr("sys.stdout", FillingStream(room=0))
    assert main(["train", "--steps", "40", "--save", str(path)]) == 2
    assert "cannot write to standard output: No space left on device" in capsys.readouterr().err
    assert not path.exists()


@pytest.mark.parametrize("argv", [["train", "--steps", "2", "--step", "3"], ["trace", "--tokens", "5", "--tok", "7"]])
def test_abbreviated_options_are_not_taken(argv, capsys):
    assert main(argv) == 2
    assert "unrecognized arguments: " in capsys.readouterr().err


def test_dev_full_with_buffered_output_stops_before_any_step(tmp_path):
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(__import__("pathlib").Path(npattn.__file__).parents[1]),
                                                       env.get("PYTHONPATH", "")]))  # fmt: skip
    path = tmp_path / "x.npz"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "npattn", "train", "--steps", "200", "--log-every", "1", "--save",
                               str(path)], stdout=full, stderr=subprocess.PIPE, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 2 and b"No space left on device" in done.stderr
    assert not path.exists()
