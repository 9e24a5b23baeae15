"""``npattn train`` names the option whose checkpoint path it refuses (``--save``, ``--resume``), and
refuses a device such as /dev/null as a device, not for its missing .npz extension."""

import pytest

from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train.command import train_task

CASES = [
    (["--save", ""], "--save: checkpoint path must name a file, got ''"),
    (["--resume", ""], "--resume: checkpoint path must name a file, got ''"),
    (["--task", "lm", "--save", ""], "--save: checkpoint path must name a file, got ''"),
    (["--save", "/dev/null"], "--save: cannot write checkpoint '/dev/null': it is a character device; save to a file "
                              "path"),
    (["--resume", "/dev/null"], "--resume: checkpoint '/dev/null' is a character device, not a file"),
    (["--resume", "missing.npz"], "--resume: checkpoint 'missing.npz' does not exist"),
]


@pytest.mark.parametrize("options, message", CASES)
def test_a_refused_checkpoint_path_names_its_option(tmp_path, monkeypatch, capsys, options, message):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--steps", "1", *options]) == 2
    assert capsys.readouterr().err == f"npattn train: error: {message}\n"


def test_train_task_refuses_dev_null_as_a_device():
    with pytest.raises(CheckpointError, match=r"^cannot write checkpoint '/dev/null': it is a character device"):
        train_task(steps=1, save="/dev/null")
