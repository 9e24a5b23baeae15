"""A run checkpoint carries a digest of its own contents, and resume refuses one edited after the
run wrote it: edits that contradict nothing a check can see (a loss scaled, two parameters' Adam
moments swapped, a word of the dropout generator's state, two embedding rows swapped) included."""

from __future__ import annotations

import numpy as np
import pytest
from training_bad_inputs import LM_TINY

import npattn
from npattn.cli.main import main
from npattn.errors import CheckpointError
from npattn.train import checkpoint
from npattn.train.command import train_task
from npattn.train.digest import DIGEST_KEY, stamped, state_digest
from npattn.train.lm_run import run_lm
from npattn.train.text import default_corpus

CHANGED = (
    "was changed after the run wrote it: its contents do not match the digest the run stored "
    "(a run resumes only from a checkpoint it wrote)"
)


def _lm(folder, **given):
    text = folder / "t.txt"
    if not text.exists():
        text.write_text(default_corpus()[:3_000], encoding="utf-8")
    return {**LM_TINY, "text": str(text), **given}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A teacher-student run saved at step 6 and run on to 8, a tiny language-model run saved after
    3 steps and run on to 5."""
    folder = tmp_path_factory.mktemp("runs")
    train_task("teacher-student", steps=6, save=folder / "task6.npz")
    train_task("teacher-student", steps=8, save=folder / "task8.npz")
    run_lm(_lm(folder, steps=3), save=folder / "lm3.npz", out=None)
    run_lm(_lm(folder, steps=5), save=folder / "lm5.npz", out=None)
    return folder


def _edited(path, folder, edit):
    """The checkpoint at ``path`` after ``edit``, saved as it is (its stored digest left alone)."""
    state = npattn.load(path)
    edit(state)
    edited = folder / "edited.npz"
    npattn.save(state, edited)
    return edited


def _swap(entries, i, j):
    entries[i], entries[j] = entries[j], entries[i]


def _swap_same_shape_states(state):
    """Swap the Adam states of the first two parameters of one shape (a consistent-looking edit)."""
    moments = state["optimizer"]["state"]
    seen = {}
    for key, entry in moments.items():
        shape = entry["exp_avg"].shape
        if shape in seen:
            return _swap(moments, seen[shape], key)
        seen[shape] = key
    raise AssertionError("no two parameters of one shape")


def _scale(entry, key, factor):
    entry[key] = entry[key] * factor


def _swap_rows(array):
    array[[0, 1]] = array[[1, 0]]


EDITS = {  # each for both kinds of run: (teacher-student edit, language-model edit)
    "a history loss x1.01": (
        lambda s: s["history"]["loss"].__setitem__(5, s["history"]["loss"][5] * 1.01),
        lambda s: s["history"]["train_losses"].__setitem__(1, s["history"]["train_losses"][1] * 1.01),
    ),
    "two parameters' Adam states swapped": (_swap_same_shape_states, _swap_same_shape_states),
    "exp_avg_sq of one parameter x4": (
        lambda s: _scale(s["optimizer"]["state"][0], "exp_avg_sq", 4),
        lambda s: _scale(s["optimizer"]["state"][0], "exp_avg_sq", 4),
    ),
    "param_groups params reordered": (
        lambda s: _swap(s["optimizer"]["param_groups"][0]["params"], 0, 1),
        lambda s: _swap(s["optimizer"]["param_groups"][0]["params"], 0, 1),
    ),
    "two rows of a weight swapped": (
        lambda s: _swap_rows(s["model"]["W_query"]),
        lambda s: _swap_rows(s["model"]["tok_emb.weight"]),
    ),
    "the digest itself": (
        lambda s: s.update(digest="0" * 64),
        lambda s: s.update(digest=s["digest"].upper()),
    ),
    "an entry another check refuses (the digest comes first)": (
        lambda s: s.update(step=-2),
        lambda s: s["history"].update(global_step=-5),
    ),
}
LM_EDITS = {
    "a word of the dropout generator's state": lambda s: s["dropout_rng"][0]["key"].__setitem__(
        5, s["dropout_rng"][0]["key"][5] ^ 1
    ),
    "settings.drop_rate 0.1 -> 0.2": lambda s: s["run"]["settings"].update(drop_rate=0.2),
    "the elapsed seconds": lambda s: s["history"].update(seconds=s["history"]["seconds"] + 1.0),
}


@pytest.mark.parametrize("edit", [pair[0] for pair in EDITS.values()], ids=list(EDITS))
def test_a_teacher_student_checkpoint_edited_after_the_run_is_refused(runs, tmp_path, edit):
    edited = _edited(runs / "task6.npz", tmp_path, edit)
    with pytest.raises(CheckpointError) as caught:
        train_task(steps=8, resume=edited)
    assert str(caught.value) == f"{str(edited)!r} {CHANGED}"


@pytest.mark.parametrize(
    "edit", [pair[1] for pair in EDITS.values()] + list(LM_EDITS.values()), ids=list(EDITS) + list(LM_EDITS)
)
def test_a_language_model_checkpoint_edited_after_the_run_is_refused(runs, tmp_path, edit):
    edited = _edited(runs / "lm3.npz", tmp_path, edit)
    with pytest.raises(CheckpointError) as caught:
        run_lm(_lm(runs, steps=5), resume=edited, out=None)
    assert str(caught.value) == f"{str(edited)!r} {CHANGED}"


def test_the_cli_refuses_an_edited_checkpoint_in_one_line(runs, tmp_path, capsys):
    edited = _edited(runs / "lm3.npz", tmp_path, LM_EDITS["settings.drop_rate 0.1 -> 0.2"])
    assert main(["train", "--resume", str(edited), "--steps", "5", "--text", str(runs / "t.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and CHANGED in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["task6.npz", "lm3.npz"])
def test_a_checkpoint_without_a_digest_is_refused(runs, tmp_path, name):
    edited = _edited(runs / name, tmp_path, lambda s: s.pop(DIGEST_KEY))
    with pytest.raises(CheckpointError, match="has no 'digest' entry: it predates run checkpoints that carry a digest"):
        if name.startswith("task"):
            train_task(steps=8, resume=edited)
        else:
            run_lm(_lm(runs, steps=5), resume=edited, out=None)


def test_an_unedited_checkpoint_still_resumes_bit_for_bit(runs, tmp_path):
    train_task(steps=8, resume=runs / "task6.npz", save=tmp_path / "task.npz")
    resumed, whole = npattn.load(tmp_path / "task.npz"), npattn.load(runs / "task8.npz")
    for entry in ("model", "optimizer", "step", "run"):  # the history also logs the step a run ended at
        assert state_digest(resumed[entry]) == state_digest(whole[entry]), entry
    assert resumed["history"]["loss"].tobytes() == whole["history"]["loss"].tobytes()
    run_lm(_lm(runs, steps=5), resume=runs / "lm3.npz", save=tmp_path / "lm.npz", out=None)
    resumed, whole = npattn.load(tmp_path / "lm.npz"), npattn.load(runs / "lm5.npz")
    for entry in ("model", "optimizer", "dropout_rng", "tokenizer", "run"):
        assert state_digest(resumed[entry]) == state_digest(whole[entry]), entry
    restamped = stamped({**npattn.load(runs / "lm3.npz"), "digest": "stale"})
    assert restamped[DIGEST_KEY] == npattn.load(runs / "lm3.npz")[DIGEST_KEY]


@pytest.mark.parametrize(
    "kind, steps",
    [("task", 0), ("task", 3), ("float32", 0), ("float32", 2), ("float64", 0), ("float64", 2)],
)
def test_the_digest_survives_the_round_trip_through_the_file(tmp_path, monkeypatch, kind, steps):
    written = []
    save_run = checkpoint.save_run
    monkeypatch.setattr(checkpoint, "save_run", lambda state, *args: (written.append(state), save_run(state, *args))[1])
    path = tmp_path / "r.npz"
    if kind == "task":
        train_task("teacher-student", steps=steps, save=path)
    else:
        run_lm(_lm(tmp_path, steps=steps, dtype=kind), save=path, out=None)
    loaded = npattn.load(path)
    before = {k: v for k, v in written[-1].items() if k != DIGEST_KEY}
    after = {k: v for k, v in loaded.items() if k != DIGEST_KEY}
    assert set(before) == set(after) and DIGEST_KEY in loaded
    assert state_digest(before) == state_digest(after) == loaded[DIGEST_KEY] == written[-1][DIGEST_KEY]
    if kind != "task":
        assert loaded["model"]["tok_emb.weight"].dtype == np.dtype(kind)
    if kind == "task":
        train_task(steps=steps + 1, resume=path)  # and the run resumes from it
    else:
        run_lm(_lm(tmp_path, steps=steps + 1), resume=path, out=None)


def test_the_walk_treats_the_forms_a_round_trip_may_change_alike():
    base = {"a": [1, 2.5, True, None, "x"], "b": {0: np.arange(3.0)}}
    same = [
        {"b": {0: np.arange(3.0)}, "a": [1, 2.5, True, None, "x"]},  # key order
        {"a": (1, 2.5, True, None, "x"), "b": {0: np.arange(3.0)}},  # a tuple for a list
        {"a": [np.int64(1), np.float64(2.5), np.bool_(True), None, "x"], "b": {0: np.arange(3.0)}},
        {"a": [np.array(1), np.array(2.5), np.array(True), None, "x"], "b": {0: np.arange(3.0)}},
        {"a": [1, 2.5, True, None, "x"], "b": {np.int64(0): np.arange(6.0)[::2] / 2}},  # a strided view
    ]
    for other in same:
        assert state_digest(other) == state_digest(base), other


def test_the_walk_tells_apart_what_resume_reads_differently():
    forms = [
        {"x": 1}, {"x": 1.0}, {"x": True}, {"x": "1"}, {"x": None}, {"x": [1]}, {"x": {"1": 1}}, {"x": {1: 1}},
        {"y": 1}, {"x": 0.0}, {"x": -0.0}, {"x": 1 + 2**-52}, {"x": ["ab"]}, {"x": ["a", "b"]}, {"x": [[1], 2]},
        {"x": [1, [2]]}, {"x": np.zeros(4)}, {"x": np.zeros(4, np.float32)}, {"x": np.zeros((2, 2))},
        {"x": np.zeros(4, ">f8")}, {"x": np.zeros(4, np.int64)}, {"x": np.arange(4.0)}, {"x": np.arange(4.0)[::-1]},
        {"x": np.zeros(0)}, {"x": np.zeros((0, 4))}, {"x": 1, "y": None}, {"x": 2**64}, {"x": -1},
    ]  # fmt: skip
    digests = [state_digest(form) for form in forms]
    assert len(set(digests)) == len(forms)
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in digests)
    assert state_digest({"x": float("nan")}) == state_digest({"x": np.float64("nan")})


@pytest.mark.parametrize(
    "value, message",
    [
        (object(), "cannot compute a digest of a object"),
        (np.array(["a"]), "an array of dtype <U1"),
        ({(1, 2): 3}, "str or int keys only"),
        ({True: 3}, "str or int keys only"),
        (1j, "cannot compute a digest of a complex"),
    ],
)
def test_the_walk_refuses_what_a_checkpoint_cannot_hold(value, message):
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(")):
        state_digest({"x": value})
