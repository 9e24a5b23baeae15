"""An ndarray subclass entering npattn is read as its base ndarray (``npattn._checks.plain``):
np.matrix, whose ``*`` is the matrix product and whose reductions keep two axes, used to give
other numbers (a gradient off by 2.6) or raw tracebacks; every output is a plain ndarray equal to
the plain-array result. ``Tagged`` (a subclass that changes nothing) covers the 3-D arguments
np.matrix cannot hold: any subclass that leaked through would come out of the ufuncs again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import npattn
import npattn.nn.functional as F
from npattn.nn import losses

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
R = np.random.default_rng(0)


class Tagged(np.ndarray):
    """An ndarray subclass that changes nothing but its type."""


def _matrix(a: Any) -> Any:
    """``a`` as an np.matrix when it is a 2-D float array, as a Tagged view when it is another array."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return np.asmatrix(a) if a.ndim == 2 else a.view(Tagged)
    if isinstance(a, list):
        return [_matrix(v) for v in a]
    return a


def _tagged(a: Any) -> Any:
    return a.view(Tagged) if isinstance(a, np.ndarray) else [_tagged(v) for v in a] if isinstance(a, list) else a


def _same(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    np.testing.assert_array_equal(got, want)


def _n(*shape: int) -> np.ndarray:
    return R.standard_normal(shape)


KEEP = R.random((4, 4)) > 0.3
STAGES: dict[str, tuple[Callable, Callable, list, dict]] = {
    "softmax": (F.softmax_forward, F.softmax_backward, [_n(4, 5)], {"scale": 0.7}),
    "scores": (F.scores_forward, F.scores_backward, [_n(4, 3), _n(5, 3)], {}),
    "context": (F.context_forward, F.context_backward, [R.random((4, 5)), _n(5, 2)], {}),
    "project": (F.project_forward, F.project_backward, [_n(4, 3), _n(3, 2)], {}),
    "project_qkv": (F.project_qkv_forward, F.project_qkv_backward, [_n(4, 3), _n(3, 2), _n(3, 2), _n(3, 2)], {}),
    "bias": (F.bias_forward, F.bias_backward, [_n(4, 3), _n(3)], {}),
    "mask": (F.mask_forward, F.mask_backward, [_n(4, 4), F.causal_mask(4)], {}),
    "dropout": (F.dropout_forward, F.dropout_backward, [R.random((4, 4)), KEEP], {"p": 0.3}),
    "attention": (F.attention_forward, F.attention_backward, [_n(4, 3), _n(4, 3), _n(4, 2)],
                  {"mask": F.causal_mask(4), "dropout_keep": KEEP, "dropout_p": 0.3}),
    "split_heads": (F.split_heads_forward, F.split_heads_backward, [_n(2, 4, 6)], {"num_heads": 2}),
    "merge_heads": (F.merge_heads_forward, F.merge_heads_backward, [_n(2, 2, 4, 3)], {}),
    "concat": (F.concat_forward, F.concat_backward, [[_n(4, 2), _n(4, 3)]], {}),
    "add": (F.add_forward, F.add_backward, [_n(3, 4), _n(3, 4)], {}),
    "gelu": (F.gelu_forward, F.gelu_backward, [_n(3, 6)], {}),
    "layer_norm": (F.layer_norm_forward, F.layer_norm_backward, [_n(3, 6), _n(6), _n(6)], {}),
    "embedding": (F.embedding_forward, F.embedding_backward, [_n(7, 4), np.array([[1, 3], [6, 0]])], {}),
    "token_cross_entropy": (F.token_cross_entropy_forward, F.token_cross_entropy_backward,
                            [_n(4, 5), np.array([0, 4, 2, 1])], {}),
    "mse_loss": (losses.mse_loss_forward, losses.mse_loss_backward, [_n(4, 3), _n(4, 3)], {}),
    "cross_entropy": (losses.cross_entropy_forward, losses.cross_entropy_backward,
                      [_n(4, 5), np.array([0, 4, 2, 1])], {}),
}  # fmt: skip


def _grads(out: Any) -> list:
    outs = out if isinstance(out, tuple) else (out,)
    return [np.random.default_rng(7).standard_normal(o.shape) for o in outs]


@pytest.mark.parametrize("wrap", [_matrix, _tagged], ids=["matrix", "tagged"])
@pytest.mark.parametrize("name", STAGES)
def test_every_stage_pair_reads_a_subclass_as_its_ndarray(name: str, wrap: Callable) -> None:
    forward, backward, args, kwargs = STAGES[name]
    want_out, want_cache = forward(*args, **kwargs)
    got_out, got_cache = forward(*[wrap(a) for a in args], **{k: wrap(v) for k, v in kwargs.items()})
    _same(got_out, want_out)
    grads = _grads(want_out)
    if name == "cross_entropy" or name == "mse_loss" or name == "token_cross_entropy":
        grads = [np.float64(1.5)]  # d_loss: a number
    _same(tuple(backward(*[wrap(g) for g in grads], got_cache)), tuple(backward(*grads, want_cache)))


CFG = {"vocab_size": 11, "context_length": 5, "emb_dim": 6, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
       "qkv_bias": True}  # fmt: skip
MODULES: dict[str, tuple[Callable[[], npattn.Module], tuple[int, ...]]] = {
    "SelfAttention_v1": (lambda: npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), (6, 3)),
    "SelfAttention_v2": (lambda: npattn.SelfAttention_v2(3, 2, rng=789, dtype=np.float64), (6, 3)),
    "CausalAttention": (lambda: npattn.CausalAttention(3, 2, 6, 0.0, rng=1, dtype=np.float64), (2, 6, 3)),
    "MultiHeadAttentionWrapper": (
        lambda: npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1, dtype=np.float64), (2, 6, 3)),
    "MultiHeadAttention": (
        lambda: npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=1, dtype=np.float64), (2, 6, 3)),
    "Linear": (lambda: npattn.Linear(3, 2, rng=1, dtype=np.float64), (6, 3)),
    "Dropout": (lambda: npattn.Dropout(0.5, rng=3), (6, 3)),
    "LayerNorm": (lambda: npattn.LayerNorm(6, dtype=np.float64), (4, 6)),
    "GELU": (lambda: npattn.GELU(), (4, 6)),
    "FeedForward": (lambda: npattn.FeedForward(CFG, rng=1, dtype=np.float64), (4, 6)),
    "TransformerBlock": (lambda: npattn.TransformerBlock(CFG, rng=1, dtype=np.float64), (2, 5, 6)),
}  # fmt: skip


def _run(module: npattn.Module, x: Any, g: Any) -> tuple:
    out = module(x)
    dx = module.backward(g)
    return out, dx, *[p.grad for p in module.parameters()]


@pytest.mark.parametrize("name", MODULES)
def test_every_chapter_3_and_4_module_reads_a_subclass_as_its_ndarray(name: str) -> None:
    build, shape = MODULES[name]
    x = np.random.default_rng(5).standard_normal(shape)
    g = np.random.default_rng(6).standard_normal((*shape[:-1], build()(x).shape[-1]))
    want = _run(build(), x, g)
    _same(_run(build(), _matrix(x), _matrix(g)), want)
    _same(_run(build(), _tagged(x), _tagged(g)), want)


def test_gpt_model_reads_subclassed_ids_and_gradients() -> None:
    ids = np.array([[1, 4, 2], [0, 10, 3]])
    g = np.random.default_rng(6).standard_normal((2, 3, 11))
    want = _run(npattn.GPTModel(CFG, rng=2, dtype=np.float64), ids, g)
    _same(_run(npattn.GPTModel(CFG, rng=2, dtype=np.float64), np.asmatrix(ids), _tagged(g)), want)


def test_a_parameter_grad_buffer_and_state_dict_value_are_read_as_ndarrays() -> None:
    x, g = npattn.book_inputs().astype(np.float64), np.random.default_rng(0).standard_normal((6, 2))
    want = _run(npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), x, g)
    m = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    m.W_query.data = np.asmatrix(m.W_query.data)
    m.W_key.grad = np.asmatrix(np.zeros((3, 2)))
    assert type(m.W_query.data) is np.ndarray and type(m.W_key.grad) is np.ndarray
    _same(_run(m, x, g), want)
    m = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    m.load_state_dict({k: np.asmatrix(v) for k, v in m.state_dict().items()})
    _same(_run(m, x, g), want)
    c = npattn.CausalAttention(3, 2, 6, 0.0, rng=1, dtype=np.float64)
    c.mask = np.asmatrix(c.mask)
    c.register_buffer("extra", np.asmatrix(np.ones((2, 2))))
    assert type(c.mask) is np.ndarray and type(c.extra) is np.ndarray
    assert type(c.state_dict()["mask"]) is np.ndarray


def test_optimizer_state_and_losses_read_subclasses_as_ndarrays() -> None:
    p = npattn.Parameter(np.ones((2, 2)))
    p.grad = np.asmatrix(np.full((2, 2), 0.5))
    opt = npattn.optim.Adam([p], lr=0.1)
    opt.step()
    state = opt.state_dict()
    q = npattn.Parameter(np.ones((2, 2)))
    q.grad = np.full((2, 2), 0.5)
    opt2 = npattn.optim.Adam([q], lr=0.1)
    opt2.step()
    np.testing.assert_array_equal(p.data, q.data)
    moments = {k: (np.asmatrix(v) if isinstance(v, np.ndarray) and v.ndim == 2 else v)
               for k, v in state["state"][0].items()}  # fmt: skip
    opt2.load_state_dict({**state, "state": {0: moments}})
    assert all(type(v) is np.ndarray for v in opt2.state_dict()["state"][0].values() if isinstance(v, np.ndarray))
    loss = npattn.MSELoss()
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    _same(loss(np.asmatrix(a), np.asmatrix(b)), npattn.MSELoss()(a, b))
    _same(loss.backward(), (a - b) / 3)


def test_a_memmap_input_still_works(tmp_path: Any) -> None:
    x = npattn.book_inputs().astype(np.float64)
    mapped = np.memmap(tmp_path / "x.bin", dtype=np.float64, mode="w+", shape=x.shape)
    mapped[...] = x
    g = np.random.default_rng(0).standard_normal((6, 2))
    want = _run(npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), x, g)
    _same(_run(npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), mapped, g), want)
    out, _ = F.softmax_forward(mapped, 0.5)
    _same(out, F.softmax_forward(x, 0.5)[0])


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled"])
def test_kernels_attention_reads_subclassed_inputs_masks_and_gradients(impl: str) -> None:
    q, k, v = np.random.default_rng(1).standard_normal((3, 5, 3))
    g, mask = np.random.default_rng(2).standard_normal((5, 3)), F.causal_mask(5)
    out, cache = npattn.kernels.attention(q, k, v, mask=mask, impl=impl)
    want = (out, npattn.kernels.attention_backward(g, cache))
    out, cache = npattn.kernels.attention(_matrix(q), _matrix(k), _matrix(v), mask=_tagged(mask), impl=impl)
    _same((out, npattn.kernels.attention_backward(_matrix(g), cache)), want)
