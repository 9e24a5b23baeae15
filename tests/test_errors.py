"""Every bad input gets a clear npattn error naming the expected and the actual value.

One table, ``bad_inputs()``, drives the tests and the table in docs/errors.md:
``PYTHONPATH=. python tests/test_errors.py`` prints the table's rows from real runs, and
``test_docs_table_is_current`` fails when docs/errors.md no longer shows the messages users see.
Attention-class rows are built for every class in ``ATTENTION_CASES``; the docs show the first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES, AttentionCase
from debug_tool_bad_inputs import debug_tool_bad_inputs
from stage_bad_inputs import stage_bad_inputs
from training_bad_inputs import training_bad_inputs

import npattn
from npattn.nn import functional as F
from npattn.train.generate import generate

DOCS = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


@dataclass(frozen=True)
class BadInput:
    entry: str  # the public entry point, as a user writes it
    what: str  # the bad input, in words
    call: Callable[[], Any]
    error: type[Exception]
    fragment: str  # a piece of the message that names the expected and/or the actual value

    @property
    def id(self) -> str:
        return f"{self.entry}: {self.what}"


def _forward_then(model: npattn.Module, *xs: Any) -> npattn.Module:
    for x in xs:
        model(x)
    return model


def attention_bad_inputs(case: AttentionCase) -> list[BadInput]:
    """Forward, backward and constructor misuse of one attention class (d_in=3, d_out=2)."""
    name = case.name

    def make(d_in: Any = 3, d_out: Any = 2, rng: Any = 0, dtype: Any = np.float32) -> npattn.Module:
        return case.build(d_in, d_out, rng, dtype)

    x = np.zeros((6, 3)) if case.accepts_2d else np.zeros((1, 6, 3))
    grad_shape = (*x.shape[:-1], 2)
    rows = [
        (
            f"{name}(x)",
            "last dimension is not d_in",
            lambda: make()(np.zeros((*x.shape[:-1], 4))),
            npattn.ShapeError,
            "expected last dimension d_in=3",
        ),
        (f"{name}(x)", "1-D input", lambda: make()(np.zeros(3)), npattn.ShapeError, "got a 1-D array of shape (3,)"),
        (
            f"{name}(x)",
            "4-D input",
            lambda: make()(np.zeros((1, 2, 6, 3))),
            npattn.ShapeError,
            "got a 4-D array of shape (1, 2, 6, 3)",
        ),
        (f"{name}(x)", "a scalar", lambda: make()(3.0), npattn.ShapeError, "got a 0-D array"),
        (
            f"{name}(x)",
            "complex dtype",
            lambda: make()(np.zeros(x.shape, complex)),
            npattn.DTypeError,
            "got dtype complex128",
        ),
        (
            f"{name}(x)",
            "object array",
            lambda: make()(np.zeros(x.shape, object)),
            npattn.DTypeError,
            "got dtype object",
        ),
        (f"{name}(x)", "strings", lambda: make()(np.full(x.shape, "a")), npattn.DTypeError, "got dtype <U1"),
        (f"{name}(x)", "bytes", lambda: make()(np.full(x.shape, b"a")), npattn.DTypeError, "got dtype |S1"),
        (
            f"{name}(x)",
            "datetime64",
            lambda: make()(np.zeros(x.shape, "datetime64[s]")),
            npattn.DTypeError,
            "got dtype datetime64[s]",
        ),
        (
            f"{name}(x)",
            "ragged nested list",
            lambda: make()([[1.0, 2.0, 3.0], [1.0, 2.0]]),
            npattn.ShapeError,
            "ragged",
        ),
        (
            f"{name}(x)",
            "ragged 3-D list",
            lambda: make()([[[1, 2, 3]], [[1, 2, 3], [4, 5, 6]]]),
            npattn.ShapeError,
            "ragged",
        ),
        (f"{name}(x)", "list holding None", lambda: make()([[1.0, 2.0, None]]), npattn.DTypeError, "got dtype object"),
        (f"{name}(x)", "None", lambda: make()(None), npattn.DTypeError, "expected a real numeric array, got None"),
        (
            f"{name}(x)",
            "integers too large for any float",
            lambda: make()([[10**400, 1, 1]]),
            npattn.DTypeError,
            "got dtype object",
        ),
        (
            f"{name}.backward(g)",
            "before any forward",
            lambda: make().backward(np.zeros(grad_shape)),
            npattn.BackwardError,
            "before forward()",
        ),
        (
            f"{name}.backward(g)",
            "g of another shape",
            lambda: _forward_then(make(), x).backward(np.zeros((5, 2))),
            npattn.ShapeError,
            f"expected shape {grad_shape}",
        ),
        (
            f"{name}.backward(g)",
            "g that would broadcast",
            lambda: _forward_then(make(), x).backward(np.zeros((1, 2))),
            npattn.ShapeError,
            "got (1, 2)",
        ),
        (
            f"{name}.backward(g)",
            "a scalar g",
            lambda: _forward_then(make(), x).backward(1.0),
            npattn.ShapeError,
            "got ()",
        ),
        (
            f"{name}.backward(g)",
            "after the input changed shape (forward on 6 tokens, forward on 4, g for 6)",
            lambda: _forward_then(make(), x, x[..., :4, :]).backward(np.zeros(grad_shape)),
            npattn.ShapeError,
            "most recent forward",
        ),
        (
            f"{name}.backward(g)",
            "unbatched g after a batched forward",
            lambda: _forward_then(make(), np.zeros((2, 6, 3))).backward(np.zeros((6, 2))),
            npattn.ShapeError,
            "expected shape (2, 6, 2)",
        ),
        (
            f"{name}.backward(g)",
            "complex g",
            lambda: _forward_then(make(), x).backward(np.zeros(grad_shape, complex)),
            npattn.DTypeError,
            "complex128",
        ),
        (
            f"{name}.backward(g)",
            "None",
            lambda: _forward_then(make(), x).backward(None),
            npattn.DTypeError,
            "expected a real numeric array, got None",
        ),
    ]
    for arg, value in [
        ("d_in", 0),
        ("d_in", -1),
        ("d_in", 3.0),
        ("d_in", 2.5),
        ("d_in", True),
        ("d_in", "3"),
        ("d_in", None),
        ("d_out", 0),
        ("d_out", -2),
        ("d_out", 2.0),
        ("d_out", False),
    ]:
        kwargs = {arg: value}
        rows.append(
            (
                f"{name}(d_in, d_out)",
                f"{arg}={value!r}",
                lambda kw=kwargs: make(**kw),
                npattn.ConfigError,
                f"{arg} must be a positive integer, got {value!r}",
            )
        )
    for value in [np.int32, bool, complex, "foo", None, object]:
        rows.append(
            (
                f"{name}(..., dtype=)",
                f"dtype={getattr(value, '__name__', repr(value))}",
                lambda v=value: make(dtype=v),
                npattn.DTypeError,
                "dtype must be a floating dtype",
            )
        )
    for value in ["abc", 1.5, True, np.random.RandomState(0)]:
        rows.append(
            (
                f"{name}(..., rng=)",
                f"rng of type {type(value).__name__}",
                lambda v=value: make(rng=v),
                npattn.ConfigError,
                f"got {type(value).__name__}",
            )
        )
    for value in [2**64, -(2**63) - 1]:
        rows.append(
            (
                f"{name}(..., rng=)",
                f"rng={value} (seed out of range)",
                lambda v=value: make(rng=v),
                npattn.ConfigError,
                f"got {value}",
            )
        )
    return [BadInput(*row) for row in rows]


_DROP = object()


def _state_dict_with(**changes: Any) -> dict[str, Any]:
    """SelfAttention_v1(3, 2)'s state dict with entries replaced, added or (``_DROP``) removed."""
    state = dict(npattn.SelfAttention_v1(3, 2, rng=0).state_dict())
    for key, value in changes.items():
        if value is _DROP:
            del state[key]
        else:
            state[key] = value
    return state


def _load(state: Any) -> Any:
    return npattn.SelfAttention_v1(3, 2, rng=0).load_state_dict(state)


def _load_tied_with_two_values() -> Any:
    """GPT-2's tying (one Parameter, two names) given a different value under each name."""
    cfg = dict(vocab_size=5, context_length=3, emb_dim=4, n_heads=1, n_layers=1, drop_rate=0.0, qkv_bias=False)
    model = npattn.GPTModel(cfg, rng=0)
    model.out_head.weight = model.tok_emb.weight
    state = model.state_dict()
    state["out_head.weight"] = state["out_head.weight"] + 1
    return model.load_state_dict(state)


class _NoParameters(npattn.Module):
    def forward(self, x: Any) -> Any:
        return x


def _attention_stage_cache() -> tuple:
    return F.attention_forward(np.ones((4, 3)), np.ones((4, 3)), np.ones((4, 2)))[1]


def library_bad_inputs() -> list[BadInput]:
    """Module, Parameter, load_state_dict, gradcheck, TorchGenerator and the functional stages."""
    sa = npattn.SelfAttention_v1
    G = npattn.TorchGenerator
    q, k = np.ones((4, 3)), np.ones((5, 2))
    rows = [
        (
            "Module.to(dtype)",
            "an integer dtype",
            lambda: sa(3, 2, rng=0).to(np.int32),
            npattn.DTypeError,
            "got int32",
        ),
        ("Module.to(dtype)", "not a dtype", lambda: sa(3, 2, rng=0).to("foo"), npattn.DTypeError, "got 'foo'"),
        ("Module.to(dtype)", "None", lambda: sa(3, 2, rng=0).to(None), npattn.DTypeError, "got None"),
        (
            "Module.to(device)",
            "device 'cuda'",
            lambda: npattn.SelfAttention_v1(3, 2, rng=0).to("cuda"),
            npattn.ConfigError,
            "npattn runs on the CPU only: Module.to accepts 'cpu' or a float dtype, got device 'cuda'",
        ),
        (
            "Module.to(device, dtype)",
            "two dtypes",
            lambda: npattn.SelfAttention_v1(3, 2, rng=0).to(np.float32, np.float64),
            npattn.ConfigError,
            "Module.to takes one device and/or one dtype",
        ),
        (
            "Module.to(device=...)",
            "device='gpu'",
            lambda: npattn.SelfAttention_v1(3, 2, rng=0).to(device="gpu"),
            npattn.ConfigError,
            "got device 'gpu'",
        ),
        (
            "Module.add_module(name, module)",
            "not a Module",
            lambda: npattn.Sequential(npattn.Linear(3, 3), "relu"),
            npattn.ConfigError,
            "add_module expects an npattn.Module, got str",
        ),
        (
            "TorchGenerator.rand(*size)",
            "2**70 elements",
            lambda: G(0).rand(2**70),
            npattn.ConfigError,
            "rand of 1,180,591,620,717,411,303,424 elements is too large",
        ),
        (
            "Parameter(data, requires_grad)",
            "requires_grad='yes'",
            lambda: npattn.Parameter(np.zeros(2), requires_grad="yes"),
            npattn.ConfigError,
            "requires_grad must be",
        ),
        (
            "Parameter(data)",
            "complex data",
            lambda: npattn.Parameter(np.zeros(2, complex)),
            npattn.DTypeError,
            "complex128",
        ),
        ("Parameter(data)", "strings", lambda: npattn.Parameter(["a", "b"]), npattn.DTypeError, "<U1"),
        ("Parameter(data)", "None", lambda: npattn.Parameter(None), npattn.DTypeError, "got None"),
        ("load_state_dict(sd)", "not a mapping", lambda: _load([1, 2]), npattn.StateDictError, "got list"),
        (
            "load_state_dict(sd)",
            "missing key",
            lambda: _load(_state_dict_with(W_key=_DROP)),
            npattn.StateDictError,
            'Missing key(s) in state_dict: "W_key"',
        ),
        (
            "load_state_dict(sd)",
            "unexpected key",
            lambda: _load(_state_dict_with(bias=np.zeros(2))),
            npattn.StateDictError,
            'Unexpected key(s) in state_dict: "bias"',
        ),
        (
            "load_state_dict(sd)",
            "tied weights given two values",
            _load_tied_with_two_values,
            npattn.StateDictError,
            "out_head.weight and tok_emb.weight name one tied parameter",
        ),
        (
            "load_state_dict(sd)",
            "wrong shape",
            lambda: _load(_state_dict_with(W_key=np.zeros((2, 3)))),
            npattn.StateDictError,
            "size mismatch for W_key: copying a param with shape (2, 3)",
        ),
        (
            "load_state_dict(sd)",
            "NaN values",
            lambda: _load(_state_dict_with(W_key=np.full((3, 2), np.nan))),
            npattn.StateDictError,
            "non-finite values in W_key: 6 of 6",
        ),
        (
            "load_state_dict(sd)",
            "one inf value",
            lambda: _load(_state_dict_with(W_query=np.where(np.eye(3, 2), np.inf, 0))),
            npattn.StateDictError,
            "non-finite values in W_query: 2 of 6",
        ),
        (
            "load_state_dict(sd)",
            "float64 values that overflow float32",
            lambda: _load(_state_dict_with(W_key=np.full((3, 2), 1e300))),
            npattn.StateDictError,
            "overflow float32",
        ),
        (
            "load_state_dict(sd)",
            "strings",
            lambda: _load(_state_dict_with(W_key="abc")),
            npattn.StateDictError,
            "bad value for W_key",
        ),
        (
            "load_state_dict(sd)",
            "complex values",
            lambda: _load(_state_dict_with(W_key=np.zeros((3, 2), complex))),
            npattn.StateDictError,
            "complex128",
        ),
        (
            "load_state_dict(sd)",
            "None as a value",
            lambda: _load(_state_dict_with(W_value=None)),
            npattn.StateDictError,
            "bad value for W_value",
        ),
        (
            "load_state_dict(sd)",
            "several problems at once",
            lambda: _load({"W_query": np.zeros(1), "W_key": np.full((3, 2), np.nan), "extra": 1}),
            npattn.StateDictError,
            'Missing key(s) in state_dict: "W_value"',
        ),
        (
            "gradcheck(module, x)",
            "not a Module",
            lambda: npattn.gradcheck(lambda x: x, np.zeros((2, 3))),
            npattn.ConfigError,
            "got function",
        ),
        (
            "gradcheck(module, x)",
            "a module without parameters",
            lambda: npattn.gradcheck(_NoParameters(), np.zeros((2, 3))),
            npattn.ConfigError,
            "_NoParameters has no parameters",
        ),
        (
            "gradcheck(module, x)",
            "integer x",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.zeros((2, 3), int)),
            npattn.DTypeError,
            "got dtype int64",
        ),
        (
            "gradcheck(module, x)",
            "boolean x",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.zeros((2, 3), bool)),
            npattn.DTypeError,
            "got dtype bool",
        ),
        (
            "gradcheck(module, x)",
            "complex x",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.zeros((2, 3), complex)),
            npattn.DTypeError,
            "complex128",
        ),
        (
            "gradcheck(module, x)",
            "x holding NaN",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.full((2, 3), np.nan)),
            npattn.ConfigError,
            "contains NaN or inf",
        ),
        (
            "gradcheck(module, x)",
            "x of the wrong shape",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.zeros((2, 4))),
            npattn.ShapeError,
            "expected last dimension d_in=3",
        ),
        (
            "gradcheck(module, x)",
            "eps=0",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.ones((2, 3)), eps=0),
            npattn.ConfigError,
            "eps must be > 0, got 0",
        ),
        (
            "gradcheck(module, x)",
            "eps=nan",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.ones((2, 3)), eps=float("nan")),
            npattn.ConfigError,
            "eps must be a finite number",
        ),
        (
            "gradcheck(module, x)",
            "atol=-1",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.ones((2, 3)), atol=-1),
            npattn.ConfigError,
            "atol=-1",
        ),
        (
            "gradcheck(module, x)",
            "n_directions=0 (a check that could not fail)",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.ones((2, 3)), fast_mode=True, n_directions=0),
            npattn.ConfigError,
            "n_directions must be a positive integer, got 0",
        ),
        (
            "gradcheck(module, x)",
            "n_directions without fast_mode (was silently ignored)",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.ones((2, 3)), n_directions=3),
            npattn.ConfigError,
            "n_directions=3 applies to fast_mode=True (random directions); without it every element is checked",
        ),
        (
            "gradcheck_stage(...)",
            "names do not match inputs",
            lambda: npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [q, q], names=["a"]),
            npattn.ConfigError,
            "1 names for 2 inputs",
        ),
        (
            "gradcheck_stage(...)",
            "inputs that do not fit together",
            lambda: npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [q, k]),
            npattn.ShapeError,
            "got queries (4, 3), keys (5, 2)",
        ),
        (
            "gradcheck_stage(...)",
            "eps=-1",
            lambda: npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [q, q], eps=-1),
            npattn.ConfigError,
            "eps must be > 0",
        ),
        ("TorchGenerator(seed)", "seed=2**64", lambda: G(2**64), npattn.ConfigError, "[-2**63, 2**64)"),
        ("TorchGenerator(seed)", "seed=-2**63 - 1", lambda: G(-(2**63) - 1), npattn.ConfigError, "got -92233720368"),
        ("npattn.manual_seed(seed)", "seed=2**64", lambda: npattn.manual_seed(2**64), npattn.ConfigError, "2**64)"),
        ("TorchGenerator(seed)", "seed=1.0", lambda: G(1.0), npattn.ConfigError, "seed must be an integer, got 1.0"),
        ("TorchGenerator(seed)", "seed='1'", lambda: G("1"), npattn.ConfigError, "got '1'"),
        ("TorchGenerator(seed)", "seed=True", lambda: G(True), npattn.ConfigError, "got True"),
        ("TorchGenerator(seed)", "seed=None", lambda: G(None), npattn.ConfigError, "got None"),
        (
            "TorchGenerator.rand(*size)",
            "a negative size",
            lambda: G(0).rand(-1),
            npattn.ConfigError,
            "rand size must be an integer >= 0, got -1",
        ),
        ("TorchGenerator.rand(*size)", "a float size", lambda: G(0).rand(2.5), npattn.ConfigError, "got 2.5 (float)"),
        ("TorchGenerator.rand(*size)", "a string size", lambda: G(0).rand("3"), npattn.ConfigError, "got '3' (str)"),
        (
            "TorchGenerator.rand(*size)",
            "dtype='foo'",
            lambda: G(0).rand(2, dtype="foo"),
            npattn.DTypeError,
            "got 'foo'",
        ),
        (
            "TorchGenerator.rand(*size)",
            "dtype=float16",
            lambda: G(0).rand(2, dtype=np.float16),
            npattn.ConfigError,
            "float32 and float64, got float16",
        ),
        (
            "TorchGenerator.uniform(...)",
            "low > high",
            lambda: G(0).uniform((2,), 1.0, 0.0),
            npattn.ConfigError,
            "low=1.0 > high=0.0",
        ),
        (
            "TorchGenerator.uniform(...)",
            "a NaN bound",
            lambda: G(0).uniform((2,), float("nan"), 1.0),
            npattn.ConfigError,
            "low must be a finite number",
        ),
        (
            "TorchGenerator.normal(...)",
            "std=-1",
            lambda: G(0).normal((3,), 0.0, -1.0),
            npattn.ConfigError,
            "normal expects std >= 0, got std=-1.0",
        ),
        (
            "TorchGenerator.normal(...)",
            "mean=inf",
            lambda: G(0).normal((3,), float("inf")),
            npattn.ConfigError,
            "mean must be a finite number, got inf",
        ),
        (
            "TorchGenerator.randn(*size)",
            "dtype=float16",
            lambda: G(0).randn(3, dtype=np.float16),
            npattn.ConfigError,
            "randn supports float32 and float64, got float16",
        ),
        (
            "npattn.rand(*size, generator=)",
            "a NumPy Generator",
            lambda: npattn.rand(3, generator=np.random.default_rng(0)),
            npattn.ConfigError,
            "rand generator must be an npattn.TorchGenerator or None (the default generator), got Generator",
        ),
        (
            "npattn.randn(*size, generator=)",
            "a seed",
            lambda: npattn.randn(3, generator=123),
            npattn.ConfigError,
            "randn generator must be an npattn.TorchGenerator or None (the default generator), got int",
        ),
        (
            "TorchGenerator.bernoulli(...)",
            "p=1.5",
            lambda: G(0).bernoulli((3,), 1.5),
            npattn.ConfigError,
            "bernoulli expects 0 <= p <= 1, got p=1.5",
        ),
        (
            "TorchGenerator.bernoulli(...)",
            "dtype='foo'",
            lambda: G(0).bernoulli((3,), 0.5, dtype="foo"),
            npattn.DTypeError,
            "bernoulli dtype must be a NumPy dtype such as np.float32 or bool, got 'foo'",
        ),
        (
            "TorchGenerator.set_state(state)",
            "missing entries",
            lambda: G(0).set_state({}),
            npattn.ConfigError,
            "missing ['seed', 'key', 'pos']",
        ),
        (
            "TorchGenerator.set_state(state)",
            "a key of 2 words",
            lambda: G(0).set_state({"seed": 1, "key": [1, 2], "pos": 3}),
            npattn.ConfigError,
            "624 integer words, got shape (2,)",
        ),
        (
            "TorchGenerator.set_state(state)",
            "pos=1000",
            lambda: G(0).set_state({**G(0).get_state(), "pos": 1000}),
            npattn.ConfigError,
            "[0, 624], got 1000",
        ),
    ]
    cache = {name: fwd(*args)[1] for name, fwd, args in [
        ("project", F.project_forward, (np.ones((4, 3)), np.ones((3, 2)))),
        ("bias", F.bias_forward, (np.ones((4, 3)), np.ones(3))),
        ("scores", F.scores_forward, (np.ones((4, 3)), np.ones((5, 3)))),
        ("mask", F.mask_forward, (np.ones((4, 4)), F.causal_mask(4))),
        ("softmax", F.softmax_forward, (np.ones((4, 5)), 0.5)),
        ("dropout", F.dropout_forward, (np.ones((4, 5)), np.ones((4, 5), bool), 0.5)),
        ("context", F.context_forward, (np.ones((4, 5)), np.ones((5, 2)))),
        ("split_heads", F.split_heads_forward, (np.ones((2, 4, 6)), 2)),
        ("merge_heads", F.merge_heads_forward, (np.ones((2, 3, 4, 2)),)),
        ("concat", F.concat_forward, ([np.ones((4, 2)), np.ones((4, 3))],)),
    ]}  # fmt: skip
    rows += [
        (
            "F.context_forward(attn_weights, values)",
            "a nested list (was an AttributeError)",
            lambda: F.context_forward([[1.0, 0.0]], np.ones((2, 2))),
            npattn.DTypeError,
            "context_forward: attn_weights must be a NumPy ndarray, got list; convert it with np.asarray(attn_weights)",
        ),
        (
            "F.layer_norm_backward(d_out, cache)",
            "None as the gradient (was an AttributeError)",
            lambda: F.layer_norm_backward(None, ()),
            npattn.DTypeError,
            "layer_norm_backward: d_out must be a NumPy ndarray, got NoneType",
        ),
        (
            "F.project_forward(x, W)",
            "x's last dim is not W's first",
            lambda: F.project_forward(q, np.ones((4, 2))),
            npattn.ShapeError,
            "got x (4, 3), W (4, 2)",
        ),
        (
            "F.project_forward(x, W)",
            "a 1-D W",
            lambda: F.project_forward(q, np.ones(3)),
            npattn.ShapeError,
            "needs a 2-D W",
        ),
        (
            "F.bias_forward(y, bias)",
            "bias of another length",
            lambda: F.bias_forward(q, np.ones(2)),
            npattn.ShapeError,
            "got y (4, 3), bias (2,)",
        ),
        (
            "F.scores_forward(queries, keys)",
            "different k",
            lambda: F.scores_forward(q, k),
            npattn.ShapeError,
            "got queries (4, 3), keys (5, 2)",
        ),
        (
            "F.scores_forward(queries, keys)",
            "different batch sizes",
            lambda: F.scores_forward(np.ones((2, 4, 3)), np.ones((3, 4, 3))),
            npattn.ShapeError,
            "the same leading dims",
        ),
        (
            "F.scores_forward(queries, keys)",
            "batched queries, unbatched keys (would broadcast)",
            lambda: F.scores_forward(np.ones((2, 4, 3)), np.ones((4, 3))),
            npattn.ShapeError,
            "got queries (2, 4, 3), keys (4, 3)",
        ),
        (
            "F.scores_forward(queries, keys)",
            "1-D operands",
            lambda: F.scores_forward(np.ones(3), np.ones(3)),
            npattn.ShapeError,
            "got queries (3,), keys (3,)",
        ),
        (
            "F.mask_forward(scores, mask)",
            "mask of another size",
            lambda: F.mask_forward(np.ones((4, 5)), F.causal_mask(4)),
            npattn.ShapeError,
            "mask must broadcast to attn_scores",
        ),
        (
            "F.softmax(z)",
            "a 0-D array",
            lambda: F.softmax(np.float64(3.0)),
            npattn.ShapeError,
            "needs at least one axis",
        ),
        (
            "F.dropout_forward(w, keep, p)",
            "keep of another shape",
            lambda: F.dropout_forward(np.ones((4, 5)), np.ones((4, 4), bool), 0.5),
            npattn.ShapeError,
            "keep must broadcast",
        ),
        (
            "F.context_forward(weights, values)",
            "weights' m is not values' m",
            lambda: F.context_forward(np.ones((4, 5)), np.ones((4, 2))),
            npattn.ShapeError,
            "got attn_weights (4, 5), values (4, 2)",
        ),
        (
            "F.attention_forward(q, k, v)",
            "keys and values of different lengths",
            lambda: F.attention_forward(q, q, np.ones((5, 2))),
            npattn.ShapeError,
            "got keys (4, 3), values (5, 2)",
        ),
        (
            "F.split_heads_forward(x, h)",
            "d_out not divisible by num_heads",
            lambda: F.split_heads_forward(np.ones((2, 4, 6)), 4),
            npattn.ShapeError,
            "divisible by 4",
        ),
        (
            "F.split_heads_forward(x, h)",
            "a 2-D x",
            lambda: F.split_heads_forward(np.ones((4, 6)), 2),
            npattn.ShapeError,
            "got x (4, 6)",
        ),
        (
            "F.merge_heads_forward(x)",
            "a 3-D x",
            lambda: F.merge_heads_forward(np.ones((4, 6, 2))),
            npattn.ShapeError,
            "must be (b, h, n, hd)",
        ),
        (
            "F.concat_forward(arrays)",
            "different lengths",
            lambda: F.concat_forward([np.ones((4, 2)), np.ones((5, 2))]),
            npattn.ShapeError,
            "[(4, 2), (5, 2)]",
        ),
        ("F.concat_forward(arrays)", "no arrays", lambda: F.concat_forward([]), npattn.ShapeError, "got []"),
    ]
    backward_rows = [
        ("project", "gradient of another shape", (4, 3), "expected a gradient of shape (4, 2)"),
        ("bias", "gradient of another shape", (4, 2), "expected a gradient of shape (4, 3)"),
        ("scores", "gradient that would broadcast", (1, 5), "expected a gradient of shape (4, 5)"),
        ("mask", "gradient of another shape", (4, 5), "expected a gradient of shape (4, 4)"),
        (
            "softmax",
            "gradient that would broadcast (was silently wrong)",
            (4, 1),
            "expected a gradient of shape (4, 5)",
        ),
        ("dropout", "gradient of another shape", (4, 4), "expected a gradient of shape (4, 5)"),
        ("context", "gradient of another shape", (4, 3), "expected a gradient of shape (4, 2)"),
        ("split_heads", "gradient of another shape", (2, 4, 6), "expected a gradient of shape (2, 2, 4, 3)"),
        ("merge_heads", "gradient of another shape", (2, 4, 8), "expected a gradient of shape (2, 4, 6)"),
        ("concat", "gradient of another width", (4, 4), "expected a gradient of shape (4, 5)"),
    ]
    for stage, what, shape, fragment in backward_rows:
        backward = getattr(F, f"{stage}_backward")
        call = lambda b=backward, s=shape, c=cache[stage]: b(np.ones(s), c)  # noqa: E731
        rows.append((f"F.{stage}_backward(d, cache)", what, call, npattn.ShapeError, fragment))
    rows += [
        (
            "F.attention_backward(d, cache)",
            "gradient that would broadcast",
            lambda: F.attention_backward(np.ones((1, 2)), _attention_stage_cache()),
            npattn.ShapeError,
            "expected a gradient of shape (4, 2)",
        ),
    ]
    return [BadInput(*row) for row in rows]


def chapter3_bad_inputs() -> list[BadInput]:
    """What only the chapter-3 classes take: context_length, dropout, num_heads, qkv_bias, impl, the mask."""
    batch = np.zeros((1, 6, 3))
    book_state = npattn.CausalAttention(3, 2, 6, 0.0, rng=0).state_dict()
    bad_mask = {**book_state, "mask": np.full((6, 6), 0.5)}
    rows = [
        (
            "CausalAttention(d_in, d_out, context_length, dropout)",
            "context_length = 0",
            lambda: npattn.CausalAttention(3, 2, 0, 0.0),
            npattn.ConfigError,
            "context_length must be a positive integer, got 0",
        ),
        (
            "CausalAttention(d_in, d_out, context_length, dropout)",
            "dropout = 1.0",
            lambda: npattn.CausalAttention(3, 2, 6, 1.0),
            npattn.ConfigError,
            "dropout must lie in [0, 1), got 1.0",
        ),
        (
            "CausalAttention(d_in, d_out, context_length, dropout)",
            "dropout = -0.1",
            lambda: npattn.CausalAttention(3, 2, 6, -0.1),
            npattn.ConfigError,
            "got -0.1",
        ),
        (
            "CausalAttention(..., qkv_bias)",
            "qkv_bias = 'yes'",
            lambda: npattn.CausalAttention(3, 2, 6, 0.0, "yes"),
            npattn.ConfigError,
            "qkv_bias",
        ),
        (
            "CausalAttention(..., impl=)",
            "an unknown impl",
            lambda: npattn.CausalAttention(3, 2, 6, 0.0, impl="fast"),
            npattn.ConfigError,
            "impl must be one of",
        ),
        (
            "CausalAttention(x)",
            "sequence longer than context_length",
            lambda: npattn.CausalAttention(3, 2, 4, 0.0)(batch),
            npattn.ShapeError,
            "sequence length n=6 exceeds context_length=4",
        ),
        (
            "MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads)",
            "num_heads does not divide d_out",
            lambda: npattn.MultiHeadAttention(3, 5, 6, 0.0, num_heads=2),
            npattn.ConfigError,
            "d_out must be divisible by num_heads, got d_out=5 and num_heads=2",
        ),
        (
            "MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads)",
            "num_heads = 0",
            lambda: npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=0),
            npattn.ConfigError,
            "num_heads must be a positive integer, got 0",
        ),
        (
            "MultiHeadAttentionWrapper(..., num_heads)",
            "num_heads = 1.5",
            lambda: npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=1.5),
            npattn.ConfigError,
            "num_heads must be a positive integer, got 1.5",
        ),
        (
            "CausalAttention.load_state_dict(state)",
            "a mask with values other than 0/1",
            lambda: npattn.CausalAttention(3, 2, 6, 0.0).load_state_dict(bad_mask),
            npattn.StateDictError,
            "non-boolean values in mask",
        ),
        (
            "Dropout.fixed_keep",
            "a float mask",
            lambda: setattr(npattn.Dropout(0.5), "fixed_keep", np.ones((2, 2))),
            npattn.DTypeError,
            "float64",
        ),
        (
            "Dropout.fixed_keep",
            "a mask that drops elements with p=0, in training (was ignored)",
            lambda: _fixed(npattn.Dropout(0.0), np.eye(2, dtype=bool))(np.ones((2, 2))),
            npattn.ConfigError,
            "Dropout.fixed_keep drops 2 of 4 weights but p=0.0",
        ),
    ]
    return [BadInput(*row) for row in rows]


def _fixed(dropout: npattn.Dropout, keep: np.ndarray) -> npattn.Dropout:
    """``dropout`` with ``fixed_keep = keep``."""
    dropout.fixed_keep = keep
    return dropout


def _with_grad(grad: Callable[[npattn.Parameter], Any]) -> npattn.Module:
    """SelfAttention_v1(3, 2) after a forward, with W_value.grad replaced by ``grad(W_value)``."""
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    model(np.ones((6, 3)))
    model.W_value.grad = grad(model.W_value)
    return model


def _read_only_grad(p: npattn.Parameter) -> np.ndarray:
    grad = np.zeros_like(p.data)
    grad.flags.writeable = False
    return grad


def _overlapping_grad(p: npattn.Parameter) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(np.zeros(3, np.float32), (3, 2), (4, 0))  # two entries per place


def _read_only_weight() -> npattn.Module:
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    model.W_value.data.flags.writeable = False
    return model


def _backward_after_load() -> Any:
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    model(np.ones((6, 3)))
    model.load_state_dict(npattn.SelfAttention_v1(3, 2, rng=1).state_dict())
    return model.backward(np.ones((6, 2)))


def _with_weights_1e6() -> npattn.Module:
    model = npattn.SelfAttention_v1(3, 2, rng=0, dtype=np.float64)
    model.W_key.data[...] = 1e6
    return model


def _x1_0001(d: np.ndarray, cache: Any) -> tuple[np.ndarray]:
    """The backward of ``out = a``, off by 0.01%."""
    return (d * 1.0001,)


def _tiny_gpt() -> npattn.Module:
    cfg = dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
    return npattn.GPTModel(cfg, rng=0)


def _nan_gpt() -> npattn.Module:
    model = _tiny_gpt()
    model.out_head.weight.data[:] = np.nan
    return model


def _gpt_with_read_only_grad(name: str) -> npattn.Module:
    """A tiny GPTModel after a forward on (1, 3) ids, with ``name``'s .grad made read-only."""
    model = _tiny_gpt()
    model(np.array([[1, 2, 3]]))
    dict(model.named_parameters())[name].grad = _read_only_grad(dict(model.named_parameters())[name])
    return model


def _with_data(
    model: npattn.Module, holder: Callable[[npattn.Module], npattn.Parameter], data: np.ndarray
) -> npattn.Module:
    holder(model).data = data
    return model


def reliability_bad_inputs() -> list[BadInput]:
    """Calls that used to change state before failing, give silently wrong answers, or certify
    nothing: bad ``.grad``s, read-only targets, dtypes out of range, checks that cannot fail."""
    sa = npattn.SelfAttention_v1
    G = npattn.TorchGenerator
    ones = np.ones((6, 3))
    identity = (lambda a: (a * 1.0, None), _x1_0001)
    key = G(1).get_state()["key"]
    rows = [
        (
            "SelfAttention_v1.backward(g)",
            "a .grad of the wrong shape",
            lambda: _with_grad(lambda p: np.zeros((7, 7))).backward(np.ones((6, 2))),
            npattn.BackwardError,
            "W_value.grad has shape (7, 7) and dtype float64, expected the parameter's shape (3, 2) and dtype float32",
        ),
        (
            "SelfAttention_v1.backward(g)",
            "a .grad of another dtype (float64 for a float32 weight)",
            lambda: _with_grad(lambda p: np.zeros(p.shape)).backward(np.ones((6, 2))),
            npattn.BackwardError,
            "expected the parameter's shape (3, 2) and dtype float32",
        ),
        (
            "SelfAttention_v1.backward(g)",
            "a read-only .grad",
            lambda: _with_grad(_read_only_grad).backward(np.ones((6, 2))),
            npattn.BackwardError,
            "W_value.grad is read-only",
        ),
        (
            "SelfAttention_v1.backward(g)",
            "a .grad whose entries share memory (as_strided; was a wrong gradient)",
            lambda: _with_grad(_overlapping_grad).backward(np.ones((6, 2))),
            npattn.BackwardError,
            "W_value.grad overlaps itself (entries share memory, as np.lib.stride_tricks.as_strided makes)",
        ),
        (
            "SelfAttention_v1.backward(g)",
            "a .grad that is a list",
            lambda: _with_grad(lambda p: p.grad.tolist()).backward(np.ones((6, 2))),
            npattn.BackwardError,
            "W_value.grad is a list",
        ),
        (
            "SelfAttention_v1.backward(g)",
            "after load_state_dict (the last forward is discarded)",
            lambda: _backward_after_load(),
            npattn.BackwardError,
            "called after load_state_dict(), which discarded the last forward",
        ),
        (
            "load_state_dict(sd)",
            "a read-only weight array in the model",
            lambda: _read_only_weight().load_state_dict(sa(3, 2, rng=1).state_dict()),
            npattn.StateDictError,
            "W_value is read-only in the current model",
        ),
        (
            "load_state_dict(sd, strict)",
            "strict='no'",
            lambda: sa(3, 2, rng=0).load_state_dict(sa(3, 2, rng=0).state_dict(), strict="no"),
            npattn.ConfigError,
            "strict must be True or False, got 'no'",
        ),
        (
            "Module.to(dtype)",
            "float16 for weights beyond its range (1e6)",
            lambda: _with_weights_1e6().to(np.float16),
            npattn.DTypeError,
            "Module.to(float16) would turn finite values into inf: values out of range in W_key: 6 of 6 entries",
        ),
        (
            "Module.train(mode)",
            "mode='no'",
            lambda: sa(3, 2, rng=0).train("no"),
            npattn.ConfigError,
            "train mode must be True or False, got 'no'",
        ),
        (
            "Module.register_buffer(name, tensor)",
            "a name with a dot",
            lambda: sa(3, 2, rng=0).register_buffer("a.b", np.zeros(2)),
            npattn.ConfigError,
            "buffer name must be a non-empty string without '.', got 'a.b'",
        ),
        (
            "Module.register_buffer(name, tensor)",
            "a string instead of an array",
            lambda: sa(3, 2, rng=0).register_buffer("b", "abc"),
            npattn.DTypeError,
            "buffer 'b' must be an ndarray, got str",
        ),
        (
            "gradcheck(module, x)",
            "x with no elements (a check that could not fail)",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), np.zeros((0, 3))),
            npattn.ConfigError,
            "gradcheck needs an input x with at least one element, got shape (0, 3)",
        ),
        (
            "gradcheck(module, x)",
            "rtol=1e-3 (a gradient off by 0.01% would pass)",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), ones, rtol=1e-3),
            npattn.ConfigError,
            "rtol must be below 0.0001, got 0.001",
        ),
        (
            "gradcheck(module, x)",
            "atol=1 (a sign-flipped gradient would pass)",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), ones, atol=1.0),
            npattn.ConfigError,
            "atol=1 is too wide for these gradients",
        ),
        (
            "gradcheck(module, x)",
            "seed=-1",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), ones, seed=-1),
            npattn.ConfigError,
            "seed must be an integer >= 0, got -1",
        ),
        (
            "gradcheck(module, x)",
            "fast_mode='yes'",
            lambda: npattn.gradcheck(sa(3, 2, rng=0), ones, fast_mode="yes"),
            npattn.ConfigError,
            "fast_mode must be True or False, got 'yes'",
        ),
        (
            "gradcheck_stage(...)",
            "an input with no elements",
            lambda: npattn.gradcheck_stage(*identity, [np.zeros((0, 3))]),
            npattn.ConfigError,
            "needs inputs with at least one element, got input0 (0, 3)",
        ),
        (
            "gradcheck_stage(...)",
            "an output with no elements",
            lambda: npattn.gradcheck_stage(lambda a: (a[:0], None), _x1_0001, [np.ones((4, 3))]),
            npattn.ConfigError,
            "forward returned an output with no elements (shape (0, 3))",
        ),
        (
            "gradcheck_stage(...)",
            "atol=10 (a sign-flipped gradient would pass)",
            lambda: npattn.gradcheck_stage(*identity, [np.ones((4, 3))], atol=10.0),
            npattn.ConfigError,
            "atol=10 is too wide for these gradients",
        ),
        (
            "gradcheck_stage(...)",
            "a forward that is not a function",
            lambda: npattn.gradcheck_stage(3, _x1_0001, [np.ones((4, 3))]),
            npattn.ConfigError,
            "forward must be a function, got int",
        ),
        (
            "gradcheck_stage(...)",
            "inputs that are one array, not a list",
            lambda: npattn.gradcheck_stage(*identity, np.ones((4, 3))),
            npattn.ConfigError,
            "inputs must be a non-empty list or tuple of arrays, got ndarray",
        ),
        (
            "gradcheck_stage(...)",
            "a forward that returns no cache",
            lambda: npattn.gradcheck_stage(lambda a: a * 1.0, _x1_0001, [np.ones((4, 3))]),
            npattn.GradcheckError,
            "forward must return (out, cache), got ndarray",
        ),
        (
            "TorchGenerator.set_state(state)",
            "key words outside uint32 (-1)",
            lambda: G(1).set_state({**G(1).get_state(), "key": np.full(624, -1)}),
            npattn.ConfigError,
            "key words must lie in [0, 2**32) (uint32), got values from -1 to -1",
        ),
        (
            "TorchGenerator.set_state(state)",
            "key words outside uint32 (2**32)",
            lambda: G(1).set_state({**G(1).get_state(), "key": key.astype(np.int64) + 2**32}),
            npattn.ConfigError,
            "key words must lie in [0, 2**32) (uint32)",
        ),
        (
            "TorchGenerator.set_state(state)",
            "an all-zero key",
            lambda: G(1).set_state({**G(1).get_state(), "key": np.zeros(624, np.uint32)}),
            npattn.ConfigError,
            "key is all zeros",
        ),
        (
            "TorchGenerator.set_state(state)",
            "seed=1.5",
            lambda: G(1).set_state({**G(1).get_state(), "seed": 1.5}),
            npattn.ConfigError,
            "seed must be an integer, got 1.5",
        ),
        (
            "TorchGenerator.set_state(state)",
            "None",
            lambda: G(1).set_state(None),  # type: ignore[arg-type]
            npattn.ConfigError,
            "generator state must be the dict get_state returns, got NoneType",
        ),
        (
            "kernels.attention(q, k, v)",
            "causal='yes'",
            lambda: npattn.kernels.attention(ones, ones, ones, causal="yes"),
            npattn.ConfigError,
            "causal must be True or False, got 'yes'",
        ),
        (
            "kernels.attention(q, k, v)",
            "a float mask",
            lambda: npattn.kernels.attention(ones, ones, ones, mask=np.zeros((6, 6))),
            npattn.DTypeError,
            "mask must be a bool array (True = masked), got dtype float64",
        ),
        (
            "kernels.attention(q, k, v)",
            "1-D queries",
            lambda: npattn.kernels.attention(ones[0], ones, ones),
            npattn.ShapeError,
            "queries: expected an array of shape (..., n, k), got shape (3,)",
        ),
        (
            "kernels.attention(q, k, v)",
            "None as queries",
            lambda: npattn.kernels.attention(None, ones, ones),
            npattn.DTypeError,
            "queries: expected a real numeric array, got None",
        ),
        (
            "kernels.attention(q, k, v)",
            "block_q=0 on a path that does not use it",
            lambda: npattn.kernels.attention(ones, ones, ones, impl="fused", block_q=0),
            npattn.ConfigError,
            "block_q must be a positive integer, got 0",
        ),
        (
            "kernels.attention_backward(d, cache)",
            "a gradient of another shape (fused path)",
            lambda: npattn.kernels.attention_backward(
                np.ones((3, 3)), npattn.kernels.attention(ones, ones, ones, impl="fused")[1]
            ),
            npattn.ShapeError,
            "attention_backward: expected a gradient of shape (6, 3) (the output's), got (3, 3)",
        ),
        (
            "kernels.attention_backward(d, cache)",
            "a cache that attention() did not return",
            lambda: npattn.kernels.attention_backward(ones, None),  # type: ignore[arg-type]
            npattn.ConfigError,
            "cache must be the cache kernels.attention returned, got NoneType",
        ),
        (
            "kernels.fused.fused_forward(q, k, v)",
            "float16 (exp would floor every weight near 0.06 of the row's largest)",
            lambda: npattn.kernels.fused.fused_forward(*(ones.astype(np.float16),) * 3),
            npattn.DTypeError,
            "expected a float32 or float64 array, got dtype float16",
        ),
        (
            "F.softmax(z)",
            "a bool array (was a raw NumPy TypeError)",
            lambda: F.softmax(np.ones((2, 3), bool)),
            npattn.DTypeError,
            "softmax: z must hold real numbers (float or int), got dtype bool",
        ),
        (
            "F.scores_forward(queries, keys)",
            "bool operands (NumPy's matmul of bools is a logical or: silently wrong)",
            lambda: F.scores_forward(np.ones((4, 3), bool), np.ones((5, 3), bool)),
            npattn.DTypeError,
            "scores_forward: queries must hold real numbers (float or int), got dtype bool",
        ),
        (
            "GPTModel.backward(dlogits)",
            "a read-only .grad on pos_emb.weight, the last parameter accumulated",
            lambda: _gpt_with_read_only_grad("pos_emb.weight").backward(np.ones((1, 3, 5))),
            npattn.BackwardError,
            "GPTModel.backward(): pos_emb.weight.grad is read-only (its flags.writeable is False); "
            "no gradient was changed",
        ),
        (
            "F.add_forward(x, y)",
            "bool operands (NumPy's bool + bool is a logical or: silently wrong)",
            lambda: F.add_forward(np.ones((2, 3), bool), np.ones((2, 3), bool)),
            npattn.DTypeError,
            "add_forward: x must hold real numbers (float or int), got dtype bool",
        ),
        (
            "F.layer_norm_forward(x, scale, shift, eps)",
            "eps = -1 (a NaN output)",
            lambda: F.layer_norm_forward(np.ones((2, 3)), np.ones(3), np.zeros(3), -1.0),
            npattn.ConfigError,
            "layer_norm_forward: eps must be a finite number > 0, got -1.0",
        ),
        (
            "F.gelu_forward(x)",
            "bool x",
            lambda: F.gelu_forward(np.ones(3, bool)),
            npattn.DTypeError,
            "gelu_forward: x must hold real numbers (float or int), got dtype bool",
        ),
        (
            "F.token_cross_entropy_forward(logits, targets)",
            "a target of -1 (was silent on ignore_index)",
            lambda: F.token_cross_entropy_forward(np.zeros((2, 7)), np.array([0, -1])),
            npattn.ConfigError,
            "targets must lie in [0, 7), or ignore_index=-100 for a target to ignore, got values from -1 to 0",
        ),
        (
            "CrossEntropyLoss()(input, target)",
            "a bool target (was called a float64 target of the wrong shape)",
            lambda: npattn.CrossEntropyLoss()(np.zeros((4, 3)), np.array([True, False, True, True])),
            npattn.DTypeError,
            "cross_entropy: target of dtype bool: class indices are integers (target.astype(np.int64))",
        ),
        (
            "F.token_cross_entropy_forward(logits, targets)",
            "bool logits",
            lambda: F.token_cross_entropy_forward(np.ones((2, 3), bool), [0, 1]),
            npattn.DTypeError,
            "token_cross_entropy_forward: logits must hold real numbers (float or int), got dtype bool",
        ),
        (
            "generate(model, idx, ..., eos_id)",
            "eos_id = vocab_size (can never be picked)",
            lambda: generate(_tiny_gpt(), [[1]], 2, 4, eos_id=5),
            npattn.ConfigError,
            "eos_id must lie in [0, vocab=5) or it can never be picked, got 5",
        ),
        (
            "generate(model, idx, ..., temperature)",
            "a model whose logits are NaN (was: tokens sampled from NaN probabilities)",
            lambda: generate(_nan_gpt(), [[1]], 2, 4, temperature=1.0, rng=1),
            npattn.ConfigError,
            "the model's logits for the next token of row 0 hold NaN or inf (or only -inf)",
        ),
        (
            "generate(model, idx, ...)",
            "greedy decoding over NaN logits (was: argmax picked token 0)",
            lambda: generate(_nan_gpt(), [[1]], 2, 4),
            npattn.ConfigError,
            "the model's logits for the next token of row 0 hold NaN or inf",
        ),
        (
            "generate(model, idx, max_new_tokens, context_size)",
            "context_size above the model's context_length (was: an error at the token past it)",
            lambda: generate(_tiny_gpt(), [[1]], 6, 5),
            npattn.ConfigError,
            "context_size=5 exceeds the model's context_length=4",
        ),
        (
            "generate_text_simple(model, idx, ...)",
            "a model whose logits are NaN (was: argmax picked token 0)",
            lambda: npattn.generate_text_simple(_nan_gpt(), [[1]], 2, 4),
            npattn.ConfigError,
            "the model's logits for the next token of row 0 hold NaN or inf",
        ),
        (
            "generate_text_simple(model, idx, max_new_tokens, context_size)",
            "context_size above the model's context_length (was: an error at the token past it)",
            lambda: npattn.generate_text_simple(_tiny_gpt(), [[1]], 6, 5),
            npattn.ConfigError,
            "context_size=5 exceeds the model's context_length=4",
        ),
        (
            "generate(model, idx, ...)",
            "an empty prompt, idx of shape (1, 0)",
            lambda: generate(_tiny_gpt(), np.zeros((1, 0), int), 2, 4),
            npattn.ConfigError,
            "idx: an empty prompt (shape (1, 0)) has no last token to continue from",
        ),
        (
            "generate(model, idx, max_new_tokens, context_size)",
            "max_new_tokens=10**400 (was a loop that never ends)",
            lambda: generate(_tiny_gpt(), [[1]], 10**400, 4),
            npattn.ConfigError,
            "max_new_tokens must be at most 9223372036854775806 for a prompt of 1 tokens",
        ),
        (
            "CausalAttention(d_in, d_out, context_length, dropout)",
            "context_length=10**12 (was NumPy's 'array is too big'; on a machine with 16 GiB)",
            _on_16_gib(lambda: npattn.CausalAttention(3, 2, 10**12, 0.0)),
            npattn.ConfigError,
            "context_length=1000000000000: the causal mask (shape (1000000000000, 1000000000000), bool) would need",
        ),
        (
            "GPTModel(cfg)",
            "n_layers=10**9 (was building blocks until memory ran out; on a machine with 16 GiB)",
            _on_16_gib(lambda: npattn.GPTModel({**npattn.GPT_CONFIG_124M, "n_layers": 10**9})),
            npattn.ConfigError,
            "more than this machine's memory (16.0 GiB)",
        ),
        (
            "SelfAttention_v1(x)",
            "W_query.data replaced with a (3, 3) array (was a silently wrong (6, 1) output)",
            lambda: _with_data(npattn.SelfAttention_v1(3, 2, rng=1), lambda m: m.W_query, np.ones((3, 3), np.float32))(
                npattn.book_inputs()
            ),
            npattn.ShapeError,
            "SelfAttention_v1: parameter W_query has shape (3, 3), expected (3, 2)",
        ),
        (
            "MultiHeadAttention(x)",
            "W_key.weight.data replaced with a (6, 4) array (was a message about x)",
            lambda: _with_data(
                npattn.MultiHeadAttention(6, 4, 5, 0.0, 2, rng=0), lambda m: m.W_key.weight, np.ones((6, 4), np.float32)
            )(np.ones((1, 5, 6))),
            npattn.ShapeError,
            "MultiHeadAttention: parameter W_key.weight has shape (6, 4), expected (4, 6)",
        ),
        (
            "GPTModel(idx)",
            "one parameter's .data replaced with float64 in a float32 model",
            lambda: _with_data(_tiny_gpt(), lambda m: m.final_norm.scale, np.ones(4))(np.zeros((1, 2), int)),
            npattn.DTypeError,
            "GPTModel: parameter final_norm.scale has dtype float64, expected float32",
        ),
        (
            "CausalAttention.dropout.p = p",
            "a string assigned after construction (was a TypeError inside the forward)",
            lambda: setattr(npattn.CausalAttention(3, 2, 6, 0.5, rng=0).dropout, "p", "abc"),
            npattn.ConfigError,
            "dropout p must be a number in [0, 1), got 'abc' (str)",
        ),
        (
            "F.project_qkv_forward(x, W_query, W_key, W_value)",
            "W_key narrower than W_query (was keys made of W_query's columns)",
            lambda: F.project_qkv_forward(np.ones((6, 3)), np.ones((3, 3)), np.ones((3, 2)), np.ones((3, 2))),
            npattn.ShapeError,
            "W_key as wide as W_query; got x (6, 3), W_query (3, 3), W_key (3, 2)",
        ),
    ]
    return [BadInput(*row) for row in rows]


def _on_16_gib(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` run as if this machine had 16 GiB of memory (so the messages do not depend on it)."""

    def run() -> Any:
        import npattn._checks as checks

        real = checks.physical_memory
        checks.physical_memory = lambda: 16 * 2**30
        try:
            return call()
        finally:
            checks.physical_memory = real

    return run


def debug_bad_inputs() -> list[BadInput]:
    """npattn check and the debugging tools it is built from (npattn.debug)."""
    import learners

    from npattn.debug.backward import diagnose_backward
    from npattn.debug.usercode import attention_from_module, book_weights, check_attention, load_attention

    x, W = npattn.book_inputs(), book_weights()
    x_nan = np.where(np.arange(18).reshape(6, 3) == 4, np.nan, x)
    grads = {"x": x, **W}

    def user() -> Any:
        return attention_from_module(learners, "attention")

    def ragged(x: Any, W_query: Any, W_key: Any, W_value: Any) -> Any:
        return [[1.0, 2.0], [1.0]]

    module = type(sys)("ragged_user")
    module.ragged = ragged

    rows = [
        (
            "check_attention(attention)",
            "user code returning a ragged list (was reported as the user's code raising, in npattn's own conversion)",
            lambda: check_attention(attention_from_module(module, "ragged")),
            npattn.DTypeError,
            "ragged returned a list, which npattn cannot read as an array (ValueError: setting an array element "
            "with a sequence.",
        ),
        (
            "check_attention(attention)",
            "neither a spec nor a UserAttention",
            lambda: check_attention(5),
            npattn.ConfigError,
            "expected a 'FILE.py:NAME' spec or a UserAttention",
        ),
        (
            "npattn check FILE.py:NAME",
            "a directory instead of a file",
            lambda: load_attention("/:attention"),
            npattn.ConfigError,
            "'/' is a directory, expected a Python file",
        ),
        (
            "check_attention(spec, x=x)",
            "x whose last dimension is not the weights' d_in",
            lambda: check_attention(user(), x=np.ones((6, 4))),
            npattn.ShapeError,
            "x: expected shape (..., n, d_in=3)",
        ),
        (
            "check_attention(spec, x=x)",
            "x holding NaN",
            lambda: check_attention(user(), x=x_nan),
            npattn.ConfigError,
            "x holds NaN or inf (1 of 18 entries non-finite)",
        ),
        (
            "check_rows(x, weights, output)",
            "a weight holding inf",
            lambda: npattn.check_rows(x, {**W, "W_key": W["W_key"] * np.inf}, np.zeros((6, 2))),
            npattn.ConfigError,
            "W_key holds NaN or inf",
        ),
        (
            "diagnose_backward(x, weights, grad_output, grads)",
            "grads as a tuple",
            lambda: diagnose_backward(x, W, np.ones((6, 2)), tuple(grads.values())),
            npattn.ConfigError,
            "grads: expected a mapping",
        ),
        (
            "diagnose_backward(x, weights, grad_output, grads)",
            "grad_output of the wrong shape",
            lambda: diagnose_backward(x, W, np.ones((6, 3)), grads),
            npattn.ShapeError,
            "grad_output: expected a real array of the output's shape (6, 2), got shape (6, 3)",
        ),
    ]
    rows += debug_tool_bad_inputs(_on_16_gib)  # tests/debug_tool_bad_inputs.py
    return [BadInput(*row) for row in rows]


def training_rows() -> list[BadInput]:
    """Optimizers, checkpoints and train_task (tests/training_bad_inputs.py)."""
    return [BadInput(*row) for row in training_bad_inputs()]


BAD_INPUTS = (
    [row for case in ATTENTION_CASES for row in attention_bad_inputs(case)]
    + library_bad_inputs()
    + chapter3_bad_inputs()
    + reliability_bad_inputs()
    + training_rows()
    + debug_bad_inputs()
    + [BadInput(*row) for row in stage_bad_inputs()]
)


def _message(row: BadInput) -> str:
    with pytest.raises(row.error) as info:
        row.call()
    return str(info.value)


@pytest.mark.parametrize("row", BAD_INPUTS, ids=[row.id for row in BAD_INPUTS])
def test_bad_input_raises_a_clear_error(row: BadInput) -> None:
    with pytest.raises(npattn.NpattnError) as info:
        row.call()
    assert type(info.value) is row.error, f"{row.id}: expected {row.error.__name__}, got {type(info.value).__name__}"
    assert row.fragment in str(info.value), f"{row.id}: {row.fragment!r} not in {str(info.value)!r}"
    assert info.value.__cause__ is None  # no chained NumPy traceback


def test_no_two_rows_test_the_same_thing() -> None:
    ids = [row.id for row in BAD_INPUTS]
    assert len(ids) == len(set(ids))


def table_rows() -> list[str]:
    """The docs/errors.md table rows for the first attention class and the library, from real runs."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n\t", "<br>").replace("\n", "<br>")

    rows = []
    rows_in_docs = attention_bad_inputs(ATTENTION_CASES[0]) + library_bad_inputs() + chapter3_bad_inputs()
    rows_in_docs += reliability_bad_inputs() + training_rows() + debug_bad_inputs()
    rows_in_docs += [BadInput(*row) for row in stage_bad_inputs()]
    for row in rows_in_docs:
        message = _message(row)
        rows.append(f"| `{cell(row.entry)}` | {cell(row.what)} | `{row.error.__name__}` | {cell(message)} |")
    return rows


def test_docs_table_is_current() -> None:
    text = DOCS.read_text()
    stale = [row for row in table_rows() if row not in text]
    hint = "docs/errors.md is out of date (regenerate the rows with PYTHONPATH=. python tests/test_errors.py)"
    assert not stale, hint + ":\n" + "\n".join(stale)


def test_failed_load_changes_nothing() -> None:
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    before = model.state_dict()
    with pytest.raises(npattn.StateDictError):
        model.load_state_dict(_state_dict_with(W_query=np.zeros((3, 2)), W_key=np.full((3, 2), 1e300)))
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[key])


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_failed_backward_changes_no_gradient(case: AttentionCase) -> None:
    model = case.build(3, 2, 0, np.float64)
    model(np.ones((1, 6, 3)))
    model.backward(np.ones((1, 6, 2)))
    before = [p.grad.copy() for p in model.parameters()]
    with pytest.raises(npattn.ShapeError):
        model.backward(np.ones((1, 5, 2)))
    for p, g in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.grad, g)


BAD_GRADS = {
    "wrong shape": lambda p: np.zeros((7, 7)),
    "wrong dtype": lambda p: np.zeros(p.shape, np.float32),
    "read-only": _read_only_grad,
    "a list": lambda p: p.grad.tolist(),
}


@pytest.mark.parametrize("bad", BAD_GRADS)
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_backward_with_a_bad_grad_changes_no_gradient(case: AttentionCase, bad: str) -> None:
    """Validate, then apply: a bad .grad on the *last* parameter leaves every .grad as it was."""
    model = case.build(3, 2, 0, np.float64)
    x, g = np.ones((1, 6, 3)), np.ones((1, 6, 2))
    model(x)
    model.backward(g)
    params = list(model.parameters())
    params[-1].grad = BAD_GRADS[bad](params[-1])
    before = [p.grad.copy() if isinstance(p.grad, np.ndarray) else list(p.grad) for p in params]
    with pytest.raises(npattn.BackwardError, match="no gradient was changed"):
        model.backward(g)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(np.asarray(p.grad), np.asarray(b))
    model.zero_grad()  # replaces the bad .grad; backward works again
    model.backward(g)
    assert params[-1].grad.shape == params[-1].shape and params[-1].grad.dtype == np.float64


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_grad_set_to_none_starts_from_zeros(case: AttentionCase) -> None:
    """Like PyTorch: a .grad of None is created by backward."""
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((1, 5, 3)), rng.standard_normal((1, 5, 2))
    model, fresh = case.build(3, 2, 0, np.float64), case.build(3, 2, 0, np.float64)
    for p in model.parameters():
        p.grad = None
    model(x)
    fresh(x)
    model.backward(g)
    fresh.backward(g)
    for p, q in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad)


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_failed_load_into_a_read_only_weight_changes_nothing(case: AttentionCase) -> None:
    model = case.build(3, 2, 0, np.float64)
    before = model.state_dict()
    new = {k: (v if v.dtype == bool else v + 1.0) for k, v in before.items()}
    last = list(model.parameters())[-1]
    last.data.flags.writeable = False
    with pytest.raises(npattn.StateDictError, match="is read-only in the current model"):
        model.load_state_dict(new)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[key])


def test_failed_to_changes_nothing() -> None:
    model = _with_weights_1e6()
    model.W_value.grad[...] = 3.0
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(npattn.DTypeError):
        model.to(np.float16)
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in model.parameters())
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[key])
    np.testing.assert_array_equal(model.W_value.grad, 3.0)


def test_failed_set_state_changes_nothing() -> None:
    gen, twin = npattn.TorchGenerator(4), npattn.TorchGenerator(4)
    gen.rand(3)
    twin.rand(3)
    bad = {**gen.get_state(), "pos": 7, "seed": 9, "key": np.full(624, 2**32, np.int64)}
    with pytest.raises(npattn.ConfigError):
        gen.set_state(bad)
    assert gen.initial_seed() == 4
    np.testing.assert_array_equal(gen.rand(10), twin.rand(10))


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_backward_differentiates_the_most_recent_forward(case: AttentionCase) -> None:
    """Two forwards of the same shape, then backward: the gradient is the second forward's."""
    rng = np.random.default_rng(0)
    first, second = rng.standard_normal((2, 1, 5, 3))
    g = rng.standard_normal((1, 5, 2))
    model, fresh = case.build(3, 2, 0, np.float64), case.build(3, 2, 0, np.float64)
    model(first)
    model(second)
    fresh(second)
    np.testing.assert_array_equal(model.backward(g), fresh.backward(g))


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_changing_x_after_forward_does_not_change_backward(case: AttentionCase) -> None:
    """forward keeps its own copy of x: editing the caller's array in place cannot corrupt the weight gradients."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 3))
    g = rng.standard_normal((1, 5, 2))
    model, fresh = case.build(3, 2, 0, np.float64), case.build(3, 2, 0, np.float64)
    model(x)
    fresh(x.copy())
    x[...] = 7.0
    model.backward(g)
    fresh.backward(g)
    for p, q in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad)


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_accepted_inputs_are_converted_like_numpy(case: AttentionCase) -> None:
    """Lists, ints, bools, float16 and uint are accepted and computed in the module's dtype."""
    model = case.build(3, 2, 123, np.float32)
    x = np.arange(12).reshape(1, 4, 3) % 3
    expected = model(x.astype(np.float32))
    for like in (x.tolist(), x.astype(np.int8), x.astype(np.uint64), x.astype(np.float16), x.astype(np.float64)):
        out = model(like)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, expected)
    assert model(np.ones((1, 4, 3), bool)).dtype == np.float32


def test_module_dtype_argument_accepts_float_dtypes() -> None:
    for dtype in (np.float16, np.float32, np.float64, "float64"):
        assert npattn.SelfAttention_v1(3, 2, rng=0, dtype=dtype).W_query.dtype == np.dtype(dtype)


def test_rand_accepts_zero_and_numpy_integer_sizes() -> None:
    assert npattn.TorchGenerator(0).rand(0, 3).shape == (0, 3)
    np.testing.assert_array_equal(npattn.TorchGenerator(5).rand(np.int64(3)), npattn.TorchGenerator(5).rand(3))


def test_rand_and_randn_take_torchs_generator_keyword() -> None:
    G = npattn.TorchGenerator
    npattn.manual_seed(3)
    before = npattn.default_generator.get_state()
    np.testing.assert_array_equal(npattn.rand(2, 3, generator=G(7)), G(7).rand(2, 3))
    np.testing.assert_array_equal(npattn.randn(20, generator=G(7), dtype=np.float64), G(7).randn(20, dtype=np.float64))
    after = npattn.default_generator.get_state()
    for key, value in before.items():  # the default generator was not drawn from
        np.testing.assert_array_equal(after[key], value)
    np.testing.assert_array_equal(npattn.rand(4, generator=None), G(3).rand(4))


def test_set_state_accepts_what_get_state_returns() -> None:
    a = npattn.TorchGenerator(9)
    a.rand(5)
    b = npattn.TorchGenerator(0)
    kinds = {"key": lambda v: v.tolist(), "seed": np.int64, "pos": np.int64, "normal_cache": np.float64}
    b.set_state({key: kinds[key](value) for key, value in a.get_state().items()})
    np.testing.assert_array_equal(a.rand(4), b.rand(4))


if __name__ == "__main__":
    sys.stdout.write("\n".join(table_rows()) + "\n")
