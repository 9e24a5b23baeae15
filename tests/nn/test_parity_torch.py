"""npattn against the book's PyTorch classes: outputs and every gradient to 1e-10 in float64.

Always: against tests/fixtures/torch_parity.npz (written by tests/fixtures/make_parity_fixtures.py
from torch autograd). With torch installed (marker ``torch``): against torch live, with state dicts
moving both ways under strict loading, and construction after the book's seeds bit-identical.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import npattn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = np.load(FIXTURES / "torch_parity.npz", allow_pickle=False)
CASES = sorted({key.split("|")[0] for key in DATA.files if key.endswith("|config")} - {"init"})
TOL = 1e-10


def case_arrays(case: str, kind: str) -> dict[str, np.ndarray]:
    prefix = f"{case}|{kind}|"
    return {key[len(prefix) :]: DATA[key] for key in DATA.files if key.startswith(prefix)}


def build_npattn(config: dict, rng: int = 0) -> npattn.Module:
    cls = getattr(npattn, config["cls"])
    return cls(*config["args"], qkv_bias=config["qkv_bias"], rng=rng, dtype=np.float64)


def run_npattn(model: npattn.Module, x, grad_output, keeps: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    modules = dict(model.named_modules())
    for name, keep in keeps.items():
        modules[name].fixed_keep = keep
    model.train(bool(keeps))
    out = model(x)
    result = {"out": out, "dx": model.backward(grad_output)}
    result.update({f"grad|{name}": p.grad.copy() for name, p in model.named_parameters()})
    return result


def assert_same(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> float:
    """Same names, and every array within TOL; returns the largest difference."""
    assert sorted(ours) == sorted(theirs)
    worst = 0.0
    for name, expected in theirs.items():
        np.testing.assert_allclose(ours[name], expected, rtol=0, atol=TOL, err_msg=name)
        worst = max(worst, float(np.max(np.abs(ours[name] - expected), initial=0.0)))
    return worst


def test_fixture_is_small_and_complete():
    assert (FIXTURES / "torch_parity.npz").stat().st_size < 200_000
    classes = {json.loads(str(DATA[f"{case}|config"]))["cls"] for case in CASES}
    assert classes == {"SelfAttention_v2", "CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"}
    assert any(json.loads(str(DATA[f"{case}|config"]))["train"] for case in CASES)


@pytest.mark.parametrize("case", CASES)
def test_matches_torch_fixture(case):
    config = json.loads(str(DATA[f"{case}|config"]))
    model = build_npattn(config)
    model.load_state_dict(case_arrays(case, "state"), strict=True)  # the book's float 0/1 mask included
    ours = run_npattn(model, DATA[f"{case}|x"], DATA[f"{case}|grad_output"], case_arrays(case, "keep"))
    theirs = {"out": DATA[f"{case}|out"], "dx": DATA[f"{case}|dx"]}
    theirs.update({f"grad|{k}": v for k, v in case_arrays(case, "grad").items()})
    assert_same(ours, theirs)


@pytest.mark.parametrize(
    "cls", ["SelfAttention_v2", "CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"]
)
def test_book_seed_construction_is_bit_identical_to_torch(cls):
    book = json.loads(str(DATA["init|config"]))
    model = getattr(npattn, cls)(*book["args"][cls], rng=book["seeds"][cls])
    expected = case_arrays("init", cls)
    state = model.state_dict()
    assert list(state) == list(expected)
    for key, value in expected.items():
        assert state[key].shape == value.shape, key
        if key.endswith("mask"):
            np.testing.assert_array_equal(state[key], value.astype(bool))
        else:
            assert state[key].dtype == value.dtype == np.float32
            np.testing.assert_array_equal(state[key], value, err_msg=key)


# ------------------------------------------------------------------ live, with torch installed


@pytest.fixture(scope="module")
def book():
    """The fixture script as a module: the book's torch classes, CASES, run_torch."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("make_parity_fixtures", FIXTURES / "make_parity_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_live_torch_to_npattn(book, case):
    """Fresh random data; torch's randomly initialised state dict loads into npattn (strict)."""
    import torch

    config = book.CASES[case]
    rng = np.random.default_rng(7)
    torch.manual_seed(11)
    theirs_model = book.build_torch(config)
    state = {k: v.numpy() for k, v in theirs_model.state_dict().items()}
    assert all(v.dtype == np.float64 for k, v in state.items() if k.endswith("mask"))  # the book's float mask
    model = build_npattn(config)
    assert [(k, v.shape) for k, v in model.state_dict().items()] == [(k, v.shape) for k, v in state.items()]
    model.load_state_dict(state, strict=True)
    x = rng.standard_normal(config["x"])
    p = config["args"][3] if len(config["args"]) > 3 else 0.0
    keeps = (
        {name: rng.random(shape) >= p for name, shape in book.dropout_shapes(config).items()} if config["train"] else {}
    )
    grad_output = rng.standard_normal(model.eval()(x).shape)
    theirs = book.run_torch(theirs_model, x, grad_output, keeps, p)
    assert_same(run_npattn(model, x, grad_output, keeps), theirs)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_live_npattn_to_torch(book, case):
    """npattn's state dict (bool mask) loads into the book's torch class (strict) and gives the same numbers."""
    import torch

    config = book.CASES[case]
    model = build_npattn(config, rng=np.random.default_rng(3))
    theirs_model = book.build_torch(config)
    result = theirs_model.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    for key, value in theirs_model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), model.state_dict()[key].astype(value.numpy().dtype), err_msg=key)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(config["x"])
    grad_output = rng.standard_normal(model.eval()(x).shape)
    assert_same(run_npattn(model, x, grad_output, {}), book.run_torch(theirs_model, x, grad_output, {}, 0.0))


@pytest.mark.torch
@pytest.mark.parametrize(
    "cls", ["SelfAttention_v2", "CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention"]
)
def test_live_book_seed_construction(book, cls):
    import torch

    torch.manual_seed(book.BOOK_SEEDS[cls])
    theirs = book.CLASSES[cls](*book.BOOK_ARGS[cls]).state_dict()
    ours = getattr(npattn, cls)(*book.BOOK_ARGS[cls], rng=book.BOOK_SEEDS[cls]).state_dict()
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        np.testing.assert_array_equal(ours[key], value.numpy().astype(ours[key].dtype), err_msg=key)
