"""The contract every stage pair keeps (npattn/nn/functional/contract.py), for every pair at once:
scalar arguments, bool masks, each backward's cache and its upstream gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import npattn
from npattn import kernels
from npattn.nn import functional as F
from npattn.nn import losses
from npattn.nn.functional.contract import CACHE_LENGTHS, StageCache

_R = np.random.default_rng(0)


def _r(*shape: int) -> np.ndarray:
    return _R.standard_normal(shape)


# stage -> (forward arguments, keyword arguments); every stage pair with a backward
FORWARDS: dict[str, tuple[tuple, dict[str, Any]]] = {
    "project": ((_r(4, 3), _r(3, 2)), {}),
    "project_qkv": ((_r(4, 3), _r(3, 2), _r(3, 2), _r(3, 2)), {}),
    "bias": ((_r(4, 3), _r(3)), {}),
    "scores": ((_r(4, 3), _r(5, 3)), {}),
    "mask": ((_r(4, 4), F.causal_mask(4)), {}),
    "softmax": ((_r(4, 5), 0.5), {}),
    "dropout": ((_r(4, 5), _R.random((4, 5)) < 0.5, 0.5), {}),
    "context": ((_r(4, 5), _r(5, 2)), {}),
    "split_heads": ((_r(2, 4, 6), 2), {}),
    "merge_heads": ((_r(2, 3, 4, 2),), {}),
    "concat": (([_r(4, 2), _r(4, 3)],), {}),
    "attention": ((_r(4, 3), _r(4, 3), _r(4, 2)), {"mask": F.causal_mask(4)}),
    "layer_norm": ((_r(2, 4, 3), _r(3), _r(3)), {}),
    "gelu": ((_r(2, 4),), {}),
    "embedding": ((_r(5, 3), np.array([[0, 4, 1]])), {}),
    "add": ((_r(2, 4, 3), _r(4, 3)), {}),
}


def _forward(stage: str) -> tuple[Any, StageCache]:
    args, kwargs = FORWARDS[stage]
    return getattr(F, f"{stage}_forward")(*args, **kwargs)


def _grads(out: Any, make: Any = np.ones) -> list[np.ndarray]:
    outs = out if isinstance(out, tuple) else (out,)
    return [make(o.shape) for o in outs]


def test_the_table_of_cache_lengths_is_every_forwards() -> None:
    assert set(CACHE_LENGTHS) == set(FORWARDS) | {"token_cross_entropy", "mse_loss", "cross_entropy"}
    for stage in FORWARDS:
        _, cache = _forward(stage)
        assert type(cache) is StageCache and cache.stage == f"{stage}_forward"
        assert len(cache) == CACHE_LENGTHS[stage]
    _, cache = F.token_cross_entropy_forward(_r(2, 3, 5), np.zeros((2, 3), int))
    assert len(cache) == CACHE_LENGTHS["token_cross_entropy"]


@pytest.mark.parametrize("stage", FORWARDS)
def test_every_backward_runs_on_its_own_cache_and_on_a_plain_tuple_copy(stage: str) -> None:
    out, cache = _forward(stage)
    backward = getattr(F, f"{stage}_backward")
    grads = _grads(out, lambda s: _R.standard_normal(s))
    expected = backward(*grads, cache)
    again = backward(*grads, tuple(cache))  # a cache built by hand: the same items
    for a, b in zip(expected, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("stage", FORWARDS)
@pytest.mark.parametrize("dtype", [complex, bool, object])
def test_every_backward_refuses_what_its_forward_refuses(stage: str, dtype: Any) -> None:
    """Complex gradients used to come back complex128 (project, scores); bool ones as logical ops."""
    out, cache = _forward(stage)
    grads = _grads(out, lambda s: np.ones(s, dtype=dtype))
    with pytest.raises(npattn.DTypeError, match=f"{stage}_backward: .* must hold real numbers"):
        getattr(F, f"{stage}_backward")(*grads, cache)


@pytest.mark.parametrize("stage", FORWARDS)
def test_every_backward_refuses_a_gradient_of_another_shape(stage: str) -> None:
    """mask_backward and dropout_backward used to take any shape their mask broadcasts to."""
    out, cache = _forward(stage)
    grads = _grads(out, lambda s: np.ones((2, *s)))
    with pytest.raises(npattn.ShapeError, match=f"{stage}_backward: expected a gradient of shape"):
        getattr(F, f"{stage}_backward")(*grads, cache)


@pytest.mark.parametrize("stage", FORWARDS)
@pytest.mark.parametrize("bad", ["None", "list", "empty tuple", "another stage's"])
def test_every_backward_refuses_a_cache_its_forward_did_not_return(stage: str, bad: str) -> None:
    out, cache = _forward(stage)
    other = _forward("gelu" if stage != "gelu" else "add")[1]
    cache = {"None": None, "list": list(cache), "empty tuple": (), "another stage's": other}[bad]
    with pytest.raises(npattn.ConfigError, match=f"{stage}_backward: cache must be the cache {stage}_forward returned"):
        getattr(F, f"{stage}_backward")(*_grads(out), cache)


def test_the_two_attention_caches_are_not_interchangeable() -> None:
    q = _r(4, 3)
    mine = F.attention_forward(q, q, _r(4, 2))[1]
    kernel = kernels.attention(q, q, _r(4, 2))[1]
    with pytest.raises(npattn.ConfigError, match="got the cache attention_forward returned"):
        kernels.attention_backward(np.ones((4, 2)), mine)
    with pytest.raises(npattn.ConfigError, match=r"got the cache kernels\.attention returned"):
        F.attention_backward(np.ones((4, 2)), kernel)


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -np.inf, "0.5", np.array([1.0, 2.0, 3.0]), None, True])
def test_softmax_scale_is_a_finite_real_number(scale: Any) -> None:
    with pytest.raises(npattn.ConfigError, match="softmax_forward: scale must be a"):
        F.softmax_forward(np.ones((3, 3)), scale)


def test_softmax_scale_may_be_any_real_scalar() -> None:
    s = _r(3, 3)
    expected = F.softmax_forward(s, 0.5)[0]
    for scale in (np.float64(0.5), np.array(0.5), np.float32(0.5)):
        np.testing.assert_allclose(F.softmax_forward(s, scale)[0], expected, rtol=1e-7)


@pytest.mark.parametrize(
    "call",
    [
        lambda: F.dropout_forward(np.ones((2, 2)), np.array([[2, 0], [1, 1]]), 0.5),  # weight 1 became 4.0
        lambda: F.dropout_forward(np.ones((2, 2)), np.ones((2, 2)), 0.5),
        lambda: F.attention_forward(
            np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 2)), dropout_keep=np.ones((2, 2), int), dropout_p=0.5
        ),
    ],
)
def test_keep_masks_are_bool(call: Any) -> None:
    with pytest.raises(npattn.DTypeError, match=r"keep must be a bool array \(True = kept\), got dtype"):
        call()


@pytest.mark.parametrize("mask", [np.full((3, 3), 0.5), np.triu(np.ones((3, 3)), 1), np.zeros((3, 3), int)])
def test_masks_are_bool(mask: np.ndarray) -> None:
    """mask_forward(s, full(0.5)) used to mask every entry; kernels.attention refused it already."""
    with pytest.raises(npattn.DTypeError, match=r"mask_forward: mask must be a bool array \(True = masked\)"):
        F.mask_forward(np.ones((3, 3)), mask)
    with pytest.raises(npattn.DTypeError, match=r"attention_forward: mask must be a bool array"):
        F.attention_forward(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), mask=mask)
    with pytest.raises(npattn.DTypeError, match=r"^mask must be a bool array \(True = masked\)"):
        kernels.attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), mask=mask)


Q, V = np.ones((2, 3)), np.ones((2, 2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.layer_norm_forward(Q, np.ones(3), np.ones(3), eps="1e-5"), "eps must be a real"),
        (lambda: F.layer_norm_forward(Q, np.ones(3), np.ones(3), np.nan), "eps must be a finite number > 0"),
        (lambda: F.layer_norm_forward(Q, np.ones(3), np.ones(3), 0.0), "eps must be a finite number > 0"),
        (lambda: F.split_heads_forward(np.ones((2, 3, 4)), 2.0), "num_heads must be a positive integer, got 2.0"),
        (lambda: F.split_heads_forward(np.ones((2, 3, 4)), 0), "num_heads must be a positive integer, got 0"),
        (lambda: F.split_heads_forward(np.ones((2, 3, 4)), -2), "num_heads must be a positive integer, got -2"),
        (lambda: F.dropout_forward(np.ones(2), np.ones(2, bool), "0.5"), "p must be a number in [0, 1)"),
        (lambda: F.dropout_forward(np.ones(2), np.ones(2, bool), np.nan), "p must lie in [0, 1)"),
        (lambda: F.softmax(np.ones(2), axis=1.0), "axis must be an integer"),
        (lambda: F.token_cross_entropy_forward(np.ones((2, 3)), np.zeros(2, int), None), "ignore_index must be"),
        (lambda: F.attention_forward(Q, Q, V, record=5), "record must be"),
        (lambda: F.attention_forward(Q, Q, V, dropout_p=0.5), "needs dropout_keep"),
        (lambda: kernels.attention(Q, Q, V, dropout_p=0.5), "needs dropout_keep"),
    ],
)
def test_scalar_arguments_are_checked(call: Any, message: str) -> None:
    with pytest.raises(npattn.ConfigError) as info:
        call()
    assert message in str(info.value)


def test_split_heads_no_longer_speaks_of_divisibility_by_zero() -> None:
    with pytest.raises(npattn.ConfigError) as info:
        F.split_heads_forward(np.ones((2, 3, 4)), 0)
    assert "divisible" not in str(info.value)


def test_a_split_by_a_numpy_integer_still_runs() -> None:
    out, _ = F.split_heads_forward(np.ones((2, 3, 4)), np.int64(2))
    assert out.shape == (2, 2, 3, 2)


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled"])
def test_a_head_dimension_of_zero_is_refused(impl: str) -> None:
    """It was a ZeroDivisionError (the scale 1/sqrt(0))."""
    with pytest.raises(npattn.ShapeError, match=r"need k >= 1 \(the scale is 1/sqrt\(k\)\)"):
        kernels.attention(np.zeros((3, 0)), np.zeros((3, 0)), np.ones((3, 2)), impl=impl)
    with pytest.raises(npattn.ShapeError, match=r"need k >= 1"):
        F.attention_forward(np.zeros((3, 0)), np.zeros((3, 0)), np.ones((3, 2)))


def test_modules_in_eval_mode_pass_no_dropout_rate_without_a_mask() -> None:
    """Eval mode has no keep mask: the modules pass dropout_p=0 with it, so kernels.attention's
    refusal of a rate without a mask never fires for them."""
    x = _r(2, 5, 3)
    for model in (npattn.CausalAttention(3, 2, 5, 0.5, rng=0), npattn.MultiHeadAttention(3, 4, 5, 0.5, 2, rng=0)):
        model.eval()
        model(x)
        model.backward(np.ones((2, 5, model.d_out)))


def test_float16_dropout_scale_is_torchs() -> None:
    """npattn computed 1/(1 - 0.3) in float16 (1.428); torch computes it in float32, then rounds (1.429)."""
    out, _ = F.dropout_forward(np.ones(2, np.float16), np.ones(2, bool), 0.3)
    assert out.dtype == np.float16 and out[0] == np.float16(1.4287109375)
    model = npattn.Dropout(0.3, rng=0)
    model.fixed_keep = np.ones(2, bool)
    assert model(np.ones(2, np.float16))[0] == np.float16(1.4287109375)


def test_int_weights_are_dropped_in_float64() -> None:
    """An int attn_weights made the scale 1 / int(1 - p) = 1 / 0: inf everywhere."""
    out, _ = F.dropout_forward(np.ones(2, int), np.ones(2, bool), 0.3)
    np.testing.assert_array_equal(out, np.full(2, 1 / 0.7))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dropout_equals_torchs_bit_for_bit(dtype: Any) -> None:
    torch = pytest.importorskip("torch")
    x = _R.standard_normal(4000).astype(dtype)
    for p in (0.1, 0.3, 0.7, 0.33):
        torch.manual_seed(1)
        expected = torch.nn.functional.dropout(torch.tensor(x), p, True).numpy()
        torch.manual_seed(1)
        keep = torch.empty(x.shape, dtype=torch.float64).bernoulli_(1 - p).numpy().astype(bool)
        np.testing.assert_array_equal(F.dropout_forward(x, keep, p)[0], expected)


LOSSES = {
    "token_cross_entropy": lambda: F.token_cross_entropy_forward(_r(2, 3, 5), np.zeros((2, 3), int)),
    "mse_loss": lambda: losses.mse_loss_forward(_r(2, 3), _r(2, 3)),
    "cross_entropy": lambda: losses.cross_entropy_forward(_r(2, 3), np.array([0, 2])),
}


def _loss_backward(stage: str) -> Any:
    return getattr(F, f"{stage}_backward", None) or getattr(losses, f"{stage}_backward")


@pytest.mark.parametrize("stage", LOSSES)
@pytest.mark.parametrize("bad", ["None", "empty tuple", "another stage's"])
def test_loss_backwards_refuse_a_cache_their_forward_did_not_return(stage: str, bad: str) -> None:
    """A scalar d_loss backward was not checked at all: None was 'cannot unpack NoneType'."""
    _, cache = LOSSES[stage]()
    cache = {"None": None, "empty tuple": (), "another stage's": _forward("gelu")[1]}[bad]
    with pytest.raises(npattn.ConfigError, match=f"{stage}_backward: cache must be the cache {stage}_forward"):
        _loss_backward(stage)(1.0, cache)


@pytest.mark.parametrize("stage", LOSSES)
def test_loss_backwards_run_on_their_own_cache(stage: str) -> None:
    _, cache = LOSSES[stage]()
    assert type(cache) is StageCache
    (d,) = _loss_backward(stage)(1.0, cache)
    assert np.isfinite(d).all()


@pytest.mark.parametrize("forward", [losses.mse_loss_forward, losses.cross_entropy_forward])
def test_losses_refuse_complex_inputs_and_gradients(forward: Any) -> None:
    """A complex input gave a complex loss; a complex d_loss a raw TypeError."""
    target = np.zeros((2, 3)) if forward is losses.mse_loss_forward else np.array([0, 1])
    with pytest.raises(npattn.DTypeError, match="input must hold real numbers"):
        forward(np.ones((2, 3)) * 1j, target)
    _, cache = forward(np.ones((2, 3)), target)
    backward = losses.mse_loss_backward if forward is losses.mse_loss_forward else losses.cross_entropy_backward
    with pytest.raises(npattn.DTypeError, match="d_loss: expected a real numeric array"):
        backward(1j, cache)
