"""A Parameter whose ``.data`` was replaced with another shape or dtype is refused at forward,
naming the parameter (it used to be split, broadcast or multiplied into a wrong answer)."""

from __future__ import annotations

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES

import npattn
from npattn.nn import functional as F

TINY = dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=True)


def _models() -> list[tuple[str, npattn.Module, np.ndarray]]:
    models = [(case.name, case.build(3, 2, 0, np.float32), np.ones((1, 4, 3))) for case in ATTENTION_CASES]
    models += [
        ("GPTModel", npattn.GPTModel(TINY, rng=0), np.zeros((1, 3), int)),
        ("Linear", npattn.nn.Linear(3, 2, rng=0), np.ones((4, 3))),
        ("LayerNorm", npattn.nn.LayerNorm(3), np.ones((2, 3))),
        ("Embedding", npattn.nn.Embedding(5, 3, rng=0), np.zeros((1, 2), int)),
    ]
    return models


@pytest.mark.parametrize("name, model, x", _models(), ids=[m[0] for m in _models()])
def test_every_parameter_of_every_module_is_checked(name: str, model: npattn.Module, x: np.ndarray) -> None:
    model(x)
    for pname, param in model.named_parameters():
        good = param.data
        wider = np.ones((*good.shape[:-1], good.shape[-1] + 1), good.dtype)
        param.data = wider
        with pytest.raises(
            npattn.ShapeError,
            match=rf"parameter {pname} has shape {re_shape(wider.shape)}, expected {re_shape(good.shape)}",
        ):
            model(x)
        param.data = good.astype(np.float64)
        with pytest.raises(npattn.DTypeError, match=rf"parameter {pname} has dtype float64, expected float32"):
            model(x)
        param.data = good
    model(x)


def re_shape(shape: tuple[int, ...]) -> str:
    return str(shape).replace("(", r"\(").replace(")", r"\)")


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled"])
def test_the_book_example_is_refused_on_every_path(impl: str) -> None:
    m = npattn.SelfAttention_v1(3, 2, rng=1, impl=impl)
    for name in ("W_query", "W_key", "W_value"):
        m2 = npattn.SelfAttention_v1(3, 2, rng=1, impl=impl)
        getattr(m2, name).data = np.random.rand(3, 3).astype(np.float32)
        with pytest.raises(npattn.ShapeError, match=f"parameter {name} has shape"):
            m2(npattn.book_inputs())
    assert m(npattn.book_inputs()).shape == (6, 2)


def test_to_and_load_state_dict_keep_the_module_usable() -> None:
    model = npattn.GPTModel(TINY, rng=0)
    model.to(np.float64)
    assert model(np.zeros((1, 3), int)).dtype == np.float64
    model.load_state_dict(npattn.GPTModel(TINY, rng=1).state_dict())
    model(np.zeros((1, 3), int))
    model.float()
    assert model(np.zeros((1, 3), int)).dtype == np.float32


def test_project_qkv_forward_checks_its_weights() -> None:
    x = np.ones((6, 3))
    W32, W33, W42 = np.ones((3, 2)), np.ones((3, 3)), np.ones((4, 2))
    for args in [(W33, W32, W32), (W32, W33, W32), (W42, W32, W32), (W32, W32, W42), (W32, W32, np.ones(3))]:
        with pytest.raises(npattn.ShapeError, match="project_qkv_forward"):
            F.project_qkv_forward(x, *args)
    queries, keys, values = F.project_qkv_forward(x, W32, W32, W33)[0]  # values may be wider
    assert (queries.shape, keys.shape, values.shape) == ((6, 2), (6, 2), (6, 3))
