"""A NumPy value for a run setting (``np.int64(8)``, ``np.True_``, ``np.str_('char')``) is made
the plain Python value where it is checked, so the run's save (and its resume) takes what the run
checked; a value that has no plain form is refused before the first step."""

import json

import numpy as np
import pytest
from training_bad_inputs import LM_TINY

import npattn
from npattn.errors import ConfigError
from npattn.nn.gpt import GPTModel
from npattn.train import checkpoint
from npattn.train.command import train_task
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.text import default_corpus

TINY = {**{k: v for k, v in LM_TINY.items() if k != "text"}, "steps": 2, "eval_every": 2}  # a tiny char GPT


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "t.txt"
    path.write_text(default_corpus()[:3000], encoding="utf-8")
    return str(path)


NUMPY_SETTINGS = [
    ("emb_dim", np.int64(8)),
    ("context_length", np.int16(8)),
    ("n_heads", np.int64(2)),
    ("n_layers", np.int32(1)),
    ("qkv_bias", np.True_),
    ("prompt", np.str_("The")),
    ("tokenizer", np.str_("char")),
    ("dtype", np.str_("float32")),
    ("text", None),  # the text file's path as np.str_ (set below)
]


@pytest.mark.parametrize(("field", "value"), NUMPY_SETTINGS, ids=[f for f, _ in NUMPY_SETTINGS])
def test_run_lm_saves_and_resumes_a_numpy_setting(field, value, text_file, tmp_path) -> None:
    value = np.str_(text_file) if field == "text" else value
    path = str(tmp_path / "r.npz")
    model, _, history = run_lm({**TINY, "text": text_file, field: value}, save=path, out=None)
    assert history.global_step == 1
    stored = checkpoint.load(path)["run"]["settings"]
    assert stored[field] == value and type(stored[field]) is type(value.item())
    assert all(type(v) in (int, float, bool, str) for v in model.cfg.values())
    _, _, resumed = run_lm({"steps": 3}, resume=path, save=path, out=None)
    assert resumed.global_step == 2


def test_the_settings_are_plain_python_values() -> None:
    settings = LMSettings(
        context_length=np.int16(8), emb_dim=np.int64(8), n_heads=np.uint8(2), n_layers=np.int32(1),
        qkv_bias=np.True_, prompt=np.str_("The"), tokenizer=np.str_("char"), dtype=np.str_("float64"),
        text=np.str_("t.txt"), steps=np.int64(3), drop_rate=np.float32(0.0),
    )  # fmt: skip
    json.dumps(settings.__dict__)  # JSON's types only
    assert all(type(v) in (int, float, bool, str, type(None)) for v in settings.__dict__.values())
    assert settings.qkv_bias is True and settings.emb_dim == 8


def test_a_setting_without_a_plain_form_is_refused_before_any_step() -> None:
    with pytest.raises(ConfigError, match=r"dtype \(--dtype\) must be a plain bool, int, float or str.*dtype\("):
        LMSettings(dtype=np.dtype("float32"))


@pytest.mark.parametrize("given", [{"task": np.str_("teacher-student")}, {"optimizer": np.str_("sgd")}])
def test_train_task_saves_and_resumes_a_numpy_str(given, tmp_path) -> None:
    path = str(tmp_path / "x.npz")
    settings = {"task": "teacher-student", **given}
    train_task(settings.pop("task"), steps=3, save=path, **settings)
    run = checkpoint.load(path)["run"]
    assert all(type(run[k]) is str for k in ("task", "optimizer"))
    _, _, history, _ = train_task(steps=5, resume=path, save=path)
    assert len(history.loss) == 5


def test_gpt_model_config_is_plain_and_saves(tmp_path) -> None:
    cfg = {"vocab_size": np.int64(50), "context_length": np.int64(8), "emb_dim": 8, "n_heads": np.int8(2),
           "n_layers": 1, "drop_rate": np.float32(0.0), "qkv_bias": np.False_}  # fmt: skip
    model = GPTModel(cfg, rng=1)
    assert model.cfg == {"vocab_size": 50, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
                         "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip
    assert all(type(v) in (int, float, bool) for v in model.cfg.values())
    path = str(tmp_path / "g.npz")
    npattn.save(model, path)
    assert npattn.load_metadata(path)["config"]["cfg"]["context_length"] == 8
