"""A checkpoint of the other kind of run is named as such on resume.

``train_task(resume="lm.npz")`` (``npattn train --task teacher-student --resume lm.npz``) used to
say "'lm.npz' is not a training checkpoint", though it is one, of a language-model run; and the
reverse. Both now say which run wrote it and how to resume it.
"""

import re

import pytest

import npattn
from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train.lm_run import run_lm

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=3, sample_tokens=2, prompt="the", steps=1)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    text = folder / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    run_lm(dict(LM, text=str(text)), save=str(folder / "lm.npz"), out=None)
    npattn.train_task("teacher-student", steps=1, save=str(folder / "run.npz"))
    return folder


def test_an_attention_task_refuses_a_language_model_checkpoint(checkpoints, capsys):
    lm = str(checkpoints / "lm.npz")
    message = f"{lm!r} is a checkpoint of a language-model run (npattn train --task lm), which task 'teacher-student'"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        npattn.train_task("teacher-student", steps=2, resume=lm)
    with pytest.raises(CheckpointError, match=r"which an attention task cannot continue: resume it with --task lm"):
        npattn.train_task(steps=2, resume=lm)
    assert main(["train", "--task", "teacher-student", "--resume", lm, "--steps", "2"]) == 2
    assert "is a checkpoint of a language-model run" in capsys.readouterr().err


def test_a_language_model_run_refuses_an_attention_task_checkpoint(checkpoints, capsys):
    run = str(checkpoints / "run.npz")
    message = (f"{run!r} is a checkpoint of an attention-task run (npattn train --task teacher-student), which a "
               "language-model run (--task lm) cannot continue: resume it with --task teacher-student")
    with pytest.raises(CheckpointError, match=re.escape(message)):
        run_lm(dict(steps=2), resume=run, out=None)
    assert main(["train", "--task", "lm", "--resume", run, "--steps", "2"]) == 2
    assert "is a checkpoint of an attention-task run" in capsys.readouterr().err
