"""A resumed checkpoint's arrays must have the dtype its settings name, and its dropout stream the
seed its settings give.

An lm checkpoint edited from float32 to float64 used to resume in float64 (the stored float32
weights and AdamW state were upcast); a float16 ``exp_avg`` in it, or a float32 one in a float64
attention checkpoint, was converted (digits lost: the run differs from an uninterrupted one); a
``seed`` edited to 124 was accepted although the stored dropout stream says 123 (the batches of an
epoch and the samples follow the seed). All are refused before any step, naming both values.
"""

import re

import numpy as np
import pytest
from training_bad_inputs import _lm_resume, _lm_run, edited_copy

from npattn.errors import CheckpointError
from npattn.train.command import train_task


def _f16_exp_avg(s):
    s["optimizer"]["state"][0]["exp_avg"] = s["optimizer"]["state"][0]["exp_avg"].astype(np.float16)


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda s: s["run"]["settings"].update(dtype="float64"),
            "tok_emb.weight has dtype float32, expected float64 (the run's dtype setting); the stored model and "
            "optimizer arrays must have the dtype the settings name",
        ),
        (_f16_exp_avg, "optimizer state 0 'exp_avg' has dtype float16, expected float32 (the run's dtype setting)"),
        (
            lambda s: s["run"]["settings"].update(seed=124),
            "its dropout_rng seed 123 is not the seed the run's settings give (124); the seed setting or the "
            "dropout state was edited",
        ),
    ],
)
def test_an_edited_lm_checkpoint_is_refused(tmp_path, monkeypatch, edit, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        _lm_resume(edit)


def test_the_unedited_lm_checkpoint_still_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    resumed, _, history = _lm_resume(lambda s: None)
    assert history.global_step == 4
    straight = _lm_run(given={"steps": 5})[0].state_dict()
    for name, value in resumed.state_dict().items():
        np.testing.assert_array_equal(value, straight[name])


def test_a_float32_exp_avg_in_a_float64_attention_checkpoint_is_refused(tmp_path):
    path = tmp_path / "run.npz"
    train_task("teacher-student", optimizer="adamw", steps=2, save=path, log_every=1)

    def narrow(s):
        s["optimizer"]["state"][1]["exp_avg"] = s["optimizer"]["state"][1]["exp_avg"].astype(np.float32)

    edited = edited_copy(path, tmp_path, narrow)
    message = "state of parameter 1: 'exp_avg' has dtype float32, expected float64 (the parameter's dtype"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        train_task("teacher-student", optimizer="adamw", steps=3, resume=edited, log_every=1)
