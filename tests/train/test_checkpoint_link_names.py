"""A checkpoint's format comes from the name it is saved and loaded by (.safetensors or not): a
symlink whose name and target disagree is refused before anything is written, by ``save`` and by a
training run's ``--save`` check, so no name reads back a format other than the one written. Links
that lead into /proc (``/dev/stdout``) are refused: replacing what they lead to would destroy the
file a descriptor is open on."""

import os

import numpy as np
import pytest

import npattn
from npattn.cli.main import main

LINKS = [("a.safetensors", "a_t.npz"), ("b.npz", "b_t.safetensors"), ("c.safetensors", "c_t")]


@pytest.mark.parametrize("name, target", LINKS)
def test_save_refuses_a_link_whose_names_disagree_on_the_format(tmp_path, monkeypatch, name, target):
    monkeypatch.chdir(tmp_path)
    os.symlink(target, name)
    with pytest.raises(npattn.CheckpointError, match="the two names disagree on the format"):
        npattn.save({"w": np.ones(2)}, name)
    assert not os.path.exists(target)


def test_a_link_whose_names_agree_is_written_through(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("real.npz", "link.npz")
    npattn.save({"w": np.ones(2)}, "link.npz")
    assert os.path.islink("link.npz") and npattn.load("real.npz")["w"].tolist() == [1.0, 1.0]


def test_train_refuses_such_a_link_before_the_first_step(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    os.symlink("run.safetensors", "r.npz")
    assert main(["train", "--task", "teacher-student", "--steps", "40", "--save", "r.npz"]) == 2
    captured = capsys.readouterr()
    assert "the two names disagree on the format" in captured.err and "step" not in captured.out


@pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="needs /dev/stdout as a link into /proc")
def test_a_link_to_standard_output_is_refused_and_the_redirected_file_kept(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "existing.log"
    log.write_text("old\n")
    script = "import npattn, numpy as np; print('before', flush=True); npattn.save({'w': np.ones(2)}, '/dev/stdout')"
    with open(log, "a") as out:
        result = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 1 and "it lies under /proc" in result.stderr
    assert log.read_text() == "old\nbefore\n"
    os.symlink("/dev/stdout", tmp_path / "o.npz")
    with pytest.raises(npattn.CheckpointError, match="it lies under /proc"):
        npattn.save({"w": np.ones(2)}, tmp_path / "o.npz")
