"""The random-stream cases checked against PyTorch: one table for the committed fixture
(tests/fixtures/make_random_fixtures.py) and for the live tests (tests/test_random_streams.py).

A case is a seed and a sequence of draws from one generator; its result is every draw,
flattened and concatenated as float64 (so the stream's position between draws is checked too).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

import npattn

SEEDS = (-1, 0, 2**32 + 5, 2**63 - 1)
NORMAL_SIZES = (1, 15, 16, 17, 1000)
BIG_SHAPE = (50257, 768)  # GPT-2's token embedding: 38.6M values (the 124M model draws 163M)

# (name, seed, [(kind, shape, dtype, *args), ...])
Draw = tuple[Any, ...]
STREAM_CASES: list[tuple[str, int, list[Draw]]] = []
for _seed in SEEDS:
    for _dtype in ("float32", "float64"):
        _sizes = NORMAL_SIZES if _seed == 0 else NORMAL_SIZES[:4]
        STREAM_CASES.append((f"randn_{_dtype}_seed{_seed}", _seed, [("randn", (n,), _dtype) for n in _sizes]))
    STREAM_CASES.append((f"rand_seed{_seed}", _seed, [("rand", (3, 5), "float32"), ("rand", (4,), "float64")]))
for _dtype in ("float32", "float64"):
    # the cached second value survives a 16-element draw and a rand in between
    STREAM_CASES.append((f"normal_cache_{_dtype}", 7, [
        ("randn", (3,), _dtype), ("randn", (20,), _dtype), ("rand", (2,), _dtype), ("randn", (1,), _dtype),
    ]))  # fmt: skip
    STREAM_CASES.append((f"normal_mean_std_{_dtype}", 11, [
        ("normal", (5,), _dtype, 0.3, 1.7), ("normal", (40,), _dtype, -0.3, 2.5), ("normal", (6, 7), _dtype, 4.0, 0.0),
    ]))  # fmt: skip
for _p in (0.1, 0.5, 0.8):
    STREAM_CASES.append((f"bernoulli_p{_p}", 123, [
        ("bernoulli", (6, 6), "float32", _p), ("bernoulli", (801,), "float32", _p),
        ("bernoulli", (5000,), "float64", _p), ("bernoulli", (17,), "bool", _p), ("rand", (3,), "float32"),
    ]))  # fmt: skip


def draw_npattn(seed: int, draws: list[Draw]) -> np.ndarray:
    g = npattn.TorchGenerator(seed)
    out = []
    for kind, shape, dtype, *args in draws:
        if kind == "randn":
            out.append(g.randn(*shape, dtype=dtype))
        elif kind == "rand":
            out.append(g.rand(*shape, dtype=dtype))
        elif kind == "normal":
            out.append(g.normal(shape, args[0], args[1], dtype))
        else:
            out.append(g.bernoulli(shape, args[0], dtype))
    return np.concatenate([a.astype(np.float64).ravel() for a in out])


def draw_torch(torch: Any, seed: int, draws: list[Draw]) -> np.ndarray:
    torch.manual_seed(seed)
    out = []
    for kind, shape, dtype, *args in draws:
        tdtype = getattr(torch, dtype)
        if kind == "randn":
            out.append(torch.randn(*shape, dtype=tdtype))
        elif kind == "rand":
            out.append(torch.rand(*shape, dtype=tdtype))
        elif kind == "normal":
            out.append(torch.empty(shape, dtype=tdtype).normal_(args[0], args[1]))
        else:
            out.append(torch.empty(shape, dtype=tdtype).bernoulli_(args[0]))
    return np.concatenate([t.numpy().astype(np.float64).ravel() for t in out])


def digest(values: np.ndarray) -> str:
    """sha256 of an array's bytes (the big draws are checked by digest, not stored)."""
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()
