"""A run's save path may hold nothing (no file, an empty one) or a checkpoint of an npattn training
run (the one it resumes, its own earlier output, another run's); any other file (an ``np.savez``
file, a model saved with ``npattn.save``, text) is refused before the first step, byte-identical
afterwards (exit 2 with one line / CheckpointError naming the path, what it holds, how to proceed)."""

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train import train_task
from npattn.train.checkpoint_target import foreign_content
from npattn.train.lm_run import run_lm


def _np_savez(path):
    np.savez(path, precious=np.arange(10))


def _npattn_model(path):
    npattn.save(npattn.SelfAttention_v1(3, 2), path)


def _npattn_state_dict(path):
    npattn.save({"precious": np.arange(5.0)}, path)


def _text(path):
    path.write_text("my notes, not a checkpoint\n")


FOREIGN = {"np.savez": _np_savez, "npattn.save model": _npattn_model, "state dict": _npattn_state_dict,
           "text": _text}  # fmt: skip


@pytest.fixture(params=sorted(FOREIGN))
def foreign(request, tmp_path):
    path = tmp_path / "data.npz"
    FOREIGN[request.param](path)
    return path, path.read_bytes()


def test_train_task_refuses_a_foreign_file_before_the_first_step(foreign):
    path, data = foreign
    started = []
    with pytest.raises(CheckpointError, match=r"already exists and holds .*remove the file or choose another"):
        train_task("teacher-student", steps=2, save=path, on_start=lambda: started.append(1))
    assert started == []  # refused before on_start, which runs just before the first step
    assert path.read_bytes() == data


def test_the_cli_refuses_a_foreign_file_in_one_line_exit_2(foreign, capsys):
    path, data = foreign
    assert main(["train", "--task", "teacher-student", "--steps", "3", "--save", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and str(path.name) in err and "already exists and holds" in err
    assert path.read_bytes() == data


def test_run_lm_refuses_a_foreign_file_before_printing_anything(foreign, tmp_path):
    import io

    path, data = foreign
    out = io.StringIO()
    with pytest.raises(CheckpointError, match="already exists and holds"):
        run_lm({"steps": 1}, save=path, out=out)
    assert out.getvalue() == "" and path.read_bytes() == data


def test_the_message_says_what_the_file_holds(tmp_path):
    model = tmp_path / "model.npz"
    _npattn_model(model)
    said = foreign_content(str(model))
    assert "a SelfAttention_v1 (saved with npattn.save; entries: W_query, W_key, W_value)" in said
    saved = tmp_path / "saved.npz"
    _np_savez(saved)
    assert "no '__npattn__' entry; members: precious" in foreign_content(str(saved))


def test_run_checkpoints_are_replaced_and_empty_files_written(tmp_path):
    own = tmp_path / "run.npz"
    train_task("teacher-student", steps=2, save=own)
    first = own.read_bytes()
    train_task("teacher-student", steps=3, save=own)  # a re-run replaces its own earlier output
    assert own.read_bytes() != first and npattn.load(own)["step"] == 3
    train_task(steps=5, resume=own, save=own)  # resume into the resumed file
    assert npattn.load(own)["step"] == 5
    other = tmp_path / "other.npz"
    train_task("teacher-student", steps=2, save=other, seed=7)
    train_task(steps=6, resume=own, save=other)  # another run's checkpoint is replaced
    assert npattn.load(other)["step"] == 6
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    train_task("teacher-student", steps=1, save=empty)
    assert npattn.load(empty)["step"] == 1


def test_a_file_put_at_the_path_after_the_first_check_is_refused_at_the_start(tmp_path, monkeypatch):
    """The run looks again just before it records what the path holds at its start."""
    from npattn.train import command

    path = tmp_path / "late.npz"
    real = command.RunProgress

    def late(*args, **kwargs):
        _np_savez(path)  # put there after check_run_target, before the run's guard looks
        return real(*args, **kwargs)

    monkeypatch.setattr(command, "RunProgress", late)
    with pytest.raises(CheckpointError, match="already exists and holds"):
        train_task("teacher-student", steps=2, save=path)
    assert list(np.load(path)) == ["precious"]
