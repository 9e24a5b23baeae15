"""Edge cases a hostile round found after the reliability work, one test each (each failed before its fix)."""

from __future__ import annotations

import numpy as np
import pytest
from training_bad_inputs import edited_copy

import npattn
from npattn.cli.check import parse_timeout
from npattn.cli.main import main
from npattn.nn import functional as F


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
def test_an_empty_batch_works_on_every_path(impl):
    model = npattn.SelfAttention_v1(3, 4, rng=1, impl=impl)
    out = model(np.zeros((0, 5, 3)))
    assert out.shape == (0, 5, 4) and model.backward(np.zeros((0, 5, 4))).shape == (0, 5, 3)


def test_timeout_has_an_upper_bound():
    with pytest.raises(npattn.ConfigError, match="<= 86400"):
        parse_timeout("1e10")
    assert parse_timeout("2.5") == 2.5


def test_cli_heads_is_bounded(capsys):
    assert main(["trace", "--class", "wrapper", "--heads", "100000000000", "--tokens", "1"]) == 2
    assert "--heads" in capsys.readouterr().err


def test_gradcheck_with_nothing_to_compare_refuses():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    model.requires_grad_(False)
    with pytest.raises(npattn.ConfigError, match="nothing was compared"):
        npattn.gradcheck(model, npattn.book_inputs(np.float64), check_input=False)


def test_softmax_forward_refuses_bools():
    with pytest.raises(npattn.DTypeError):
        F.softmax_forward(np.array([[True, False]]), 1.0)


@pytest.mark.parametrize("size", [(0, 2**70), (2**70, 0)])
def test_huge_dimensions_are_refused_even_with_zero_elements(size):
    with pytest.raises(npattn.ConfigError, match="too large"):
        npattn.TorchGenerator(1).rand(*size)


def test_uniform_refuses_bounds_whose_difference_overflows():
    with pytest.raises(npattn.ConfigError, match="high - low"):
        npattn.TorchGenerator(1).uniform((3,), -1e308, 1e308)


def _fit(**kwargs):
    model = npattn.SelfAttention_v1(3, 2, rng=1)
    opt = npattn.optim.SGD(model.parameters(), lr=0.1)
    x = npattn.book_inputs()
    args = {"batches": lambda step: (x, np.zeros((6, 2), np.float32)), "steps": 2, **kwargs}
    return npattn.fit(model, opt, npattn.MSELoss(), args.pop("batches"), args.pop("steps"), **args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": 2.0}, "steps"),
        ({"steps": -1}, "steps"),
        ({"batches": [1, 2]}, "batches"),
        ({"log_every": -1}, "log_every"),
    ],
)
def test_fit_checks_its_arguments(kwargs, match):
    with pytest.raises(npattn.ConfigError, match=match):
        _fit(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"maxiter": 0}, "maxiter"), ({"gtol": -1}, "gtol"), ({"ftol": np.nan}, "ftol")]
)
def test_fit_lbfgs_checks_its_arguments(kwargs, match):
    model = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    before = model.W_value.data.copy()
    with pytest.raises(npattn.ConfigError, match=match):
        npattn.fit_lbfgs(model, npattn.MSELoss(), npattn.book_inputs(np.float64), np.zeros((6, 2)), **kwargs)
    assert np.array_equal(model.W_value.data, before)


def test_gradcheck_stage_refuses_a_nonfinite_input():
    with pytest.raises(npattn.ConfigError, match="finite inputs"):
        npattn.gradcheck_stage(lambda a: (a * 2, None), lambda g, c: (2 * g,), [np.array([1.0, np.nan])])


def _resume_edited_lm_checkpoint(tmp_path, capsys, edit) -> str:
    """Train a tiny language model 2 steps, apply ``edit`` to its checkpoint, resume it: the stderr."""
    text = tmp_path / "t.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 40)
    common = ["train", "--task", "lm", "--text", str(text), "--tokenizer", "char", "--emb-dim", "8", "--n-heads", "2",
              "--n-layers", "1", "--context-length", "8", "--batch-size", "2", "--eval-every", "2", "--eval-iter", "1"]
    assert main([*common, "--steps", "2", "--save", str(tmp_path / "m.npz")]) == 0
    edited = edited_copy(tmp_path / "m.npz", tmp_path, edit)
    capsys.readouterr()
    assert main(["train", "--resume", str(edited), "--steps", "4", "--text", str(text)]) == 2
    return capsys.readouterr().err


def test_lm_resume_refuses_an_optimizer_lr_that_differs(tmp_path, capsys):
    def edit(state):
        state["optimizer"]["param_groups"][0]["lr"] = 5.0

    err = _resume_edited_lm_checkpoint(tmp_path, capsys, edit)
    assert "its optimizer's lr 5.0 differs from the run's lr 0.0004" in err
    assert "the optimizer's settings cannot change on resume" in err


def test_lm_resume_refuses_a_mask_that_is_not_causal(tmp_path, capsys):
    def edit(state):
        state["model"]["trf_blocks.0.att.mask"][...] = 0

    err = _resume_edited_lm_checkpoint(tmp_path, capsys, edit)
    assert "trf_blocks.0.att.mask is not the book's causal mask" in err
