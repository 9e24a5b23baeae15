"""Arguments refused with the message that fits them: a bool where a number goes is named a bool
(it was "must be a finite number, got True"); diagnose_backward's ``num_heads`` is checked as a
positive integer and a 2-D x is named as the problem (both were blamed on divisibility, and 0 ran
single-headed); ``npattn.load(mmap=True)`` is a ConfigError (a raw TypeError); the command line's
decimal options take the numbers a command line means (``--lr 1_000`` or other scripts' digits
trained with what Python's float() made of them); an empty checkpoint file is named empty (it
was "not a zip archive (it starts with b'')")."""

import numpy as np
import pytest

import npattn
from npattn.cli.check import parse_timeout
from npattn.cli.main import main
from npattn.debug import diagnose_backward
from npattn.errors import ConfigError, ShapeError

NAMES = ("W_query", "W_key", "W_value")


@pytest.mark.parametrize("setting", ["eps", "atol", "rtol"])
@pytest.mark.parametrize("value", [True, np.False_])
def test_a_bool_tolerance_is_named_a_bool(setting, value):
    model = npattn.SelfAttention_v1(3, 2)
    with pytest.raises(ConfigError, match=rf"^{setting} must be a finite number, not a bool, got "):
        npattn.gradcheck(model, np.ones((4, 3)), **{setting: value})


def _diagnose(x, num_heads):
    rng = np.random.default_rng(0)
    weights = {name: rng.random((3, 4)) for name in NAMES}
    grads = {"x": np.zeros(x.shape), **{name: np.zeros((3, 4)) for name in NAMES}}
    return diagnose_backward(x, weights, np.ones((*x.shape[:-1], 4)), grads, num_heads=num_heads)


def test_a_2d_x_with_num_heads_names_the_shape():
    with pytest.raises(ShapeError, match=r"num_heads=1: multi-head attention needs x of shape \(batch, n, d_in\), "
                                         r"got shape \(5, 3\)"):  # fmt: skip
        _diagnose(np.ones((5, 3)), 1)


def test_num_heads_not_dividing_d_out_names_divisibility():
    with pytest.raises(ConfigError, match=r"num_heads=3: d_out=4 must be divisible by it"):
        _diagnose(np.ones((2, 5, 3)), 3)


@pytest.mark.parametrize("num_heads", [0, -2, True, 1.5, "2"])
def test_num_heads_must_be_a_positive_integer(num_heads):
    with pytest.raises(ConfigError, match=r"diagnose_backward: num_heads must be a positive integer, got"):
        _diagnose(np.ones((2, 5, 3)), num_heads)


def test_num_heads_as_a_numpy_integer_is_accepted():
    assert _diagnose(np.ones((2, 5, 3)), np.int64(2)).problems == ()


@pytest.mark.parametrize("mmap", [True, "r", 1])
def test_load_refuses_mmap(tmp_path, mmap):
    path = str(tmp_path / "m.npz")
    npattn.save({"a": np.arange(3.0)}, path)
    with pytest.raises(ConfigError, match=rf"mmap={mmap!r} is not supported: npattn reads a checkpoint's arrays"):
        npattn.load(path, mmap=mmap)
    with pytest.raises(ConfigError, match="mmap"):
        npattn.load_metadata(path, mmap=mmap)
    np.testing.assert_array_equal(npattn.load(path, mmap=False)["a"], np.arange(3.0))
    assert npattn.load_metadata(path, mmap=None) == npattn.load_metadata(path)


@pytest.mark.parametrize("text", ["1_000", "\u0663", " 5", "0x10", "1e", "", "five"])
@pytest.mark.parametrize("option", ["--lr", "--weight-decay"])
def test_a_decimal_option_takes_plain_digits_only(text, option, capsys):
    argv = ["train", "--steps", "0", option, text] + (["--task", "lm"] if option == "--weight-decay" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"npattn train: error: argument {option}: expected a number (digits 0-9, e.g. 0.05 or 4e-4), "
                          f"got {text!r}")  # fmt: skip
    assert err.count("\n") == 1


@pytest.mark.parametrize("text", ["0.05", ".05", "5e-2", "+0.05"])
def test_a_decimal_option_takes_the_usual_forms(text, capsys):
    assert main(["train", "--steps", "0", "--lr", text]) == 0
    assert "adam(lr=0.05)" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["1_0", "\u0663", " 5", "nan"])
def test_timeout_takes_plain_digits_only(text):
    with pytest.raises(ConfigError, match=r"--timeout must be a number of seconds > 0"):
        parse_timeout(text)


def test_timeout_takes_numbers_and_plain_text():
    assert parse_timeout("2.5") == parse_timeout(2.5) == 2.5 and parse_timeout(3) == 3.0


def test_an_empty_checkpoint_is_named_empty(tmp_path):
    path = tmp_path / "e.npz"
    path.write_bytes(b"")
    empty = r"e\.npz' is truncated, corrupt or not a checkpoint: empty \(0 bytes\), not a zip archive$"
    with pytest.raises(npattn.CheckpointError, match=empty):
        npattn.load(str(path))


def test_torch_save_and_load_keywords_that_change_nothing_are_accepted(tmp_path):
    import pickle

    path = str(tmp_path / "m.npz")
    model = npattn.SelfAttention_v1(3, 2, rng=1)
    npattn.save(model, path, pickle_module=pickle, pickle_protocol=4, _use_new_zipfile_serialization=True)
    loaded = npattn.load(path, pickle_module=pickle, encoding="latin1")
    assert all(np.array_equal(loaded[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"pickle_module": np}, r"pickle_module=numpy is not supported: npattn never pickles"),
        ({"pickle_protocol": "2"}, r"pickle_protocol must be an integer"),
        ({"_use_new_zipfile_serialization": False}, r"_use_new_zipfile_serialization=False is not supported"),
    ],
)
def test_torch_save_keywords_npattn_cannot_honour_are_config_errors(tmp_path, keywords, message):
    with pytest.raises(ConfigError, match=message):
        npattn.save(npattn.SelfAttention_v1(3, 2, rng=1), str(tmp_path / "m.npz"), **keywords)
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize(
    ("keywords", "message"),
    [({"pickle_module": np}, r"pickle_module=numpy is not supported"), ({"encoding": 1}, r"encoding must be a string")],
)
def test_torch_load_keywords_npattn_cannot_honour_are_config_errors(tmp_path, keywords, message):
    path = str(tmp_path / "m.npz")
    npattn.save({"a": np.zeros(2)}, path)
    with pytest.raises(ConfigError, match=message):
        npattn.load(path, **keywords)


@pytest.mark.parametrize("n_directions", [10_001, 10**30])
def test_n_directions_is_bounded(n_directions):
    from npattn.nn import functional as F

    model = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    with pytest.raises(ConfigError, match=r"n_directions must be at most 10000"):
        npattn.gradcheck(model, np.ones((6, 3)), fast_mode=True, n_directions=n_directions)
    with pytest.raises(ConfigError, match=r"n_directions must be at most 10000"):
        npattn.gradcheck_stage(F.gelu_forward, F.gelu_backward, [np.ones((2, 2))], fast_mode=True,
                               n_directions=n_directions)  # fmt: skip


def test_dropout_takes_torchs_inplace_keyword():
    assert npattn.Dropout(0.5, inplace=False).p == 0.5
    with pytest.raises(ConfigError, match=r"Dropout: inplace=True is not supported"):
        npattn.Dropout(0.5, inplace=True)


def test_a_decimal_that_underflows_to_zero_is_refused(capsys):
    assert main(["train", "--steps", "0", "--lr", "1e-400"]) == 2
    assert "'1e-400' is too small for a float: it would be read as 0" in capsys.readouterr().err
    assert main(["train", "--steps", "0", "--lr", "0.0"]) == 0
