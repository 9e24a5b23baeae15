"""The chapter-4 stage pairs (layer norm, GELU, embedding, add, token cross-entropy) gradient-checked
in float64 with central differences and a random upstream gradient, each check shown to reject a
planted bug in that stage's backward, and each forward compared with PyTorch's when it is installed."""

import math

import numpy as np
import pytest

import npattn
from npattn.gradcheck import gradcheck_stage
from npattn.nn.functional import transformer as T

LEADS = [(), (5,), (2, 3)]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def check(forward, backward, inputs, *, names=None, **kwargs):
    return gradcheck_stage(forward, backward, inputs, kwargs=kwargs, names=names, raise_exception=False)


# ------------------------------------------------------------------------------ gradient checks


@pytest.mark.parametrize("lead", LEADS)
def test_layer_norm_pair(rng, lead):
    x = rng.standard_normal((*lead, 6)) * 3 + 1
    scale, shift = rng.standard_normal(6), rng.standard_normal(6)
    report = check(T.layer_norm_forward, T.layer_norm_backward, [x, scale, shift], names=["x", "scale", "shift"])
    assert report, report


def test_layer_norm_pair_near_constant_rows(rng):
    """Rows with a tiny variance: eps dominates sqrt(var + eps) and the backward must still be exact."""
    x = 1.0 + 1e-3 * rng.standard_normal((4, 8))
    report = check(T.layer_norm_forward, T.layer_norm_backward, [x, rng.standard_normal(8), rng.standard_normal(8)])
    assert report, report


@pytest.mark.parametrize("lead", LEADS)
def test_gelu_pair(rng, lead):
    x = rng.standard_normal((*lead, 7)) * 2.5
    assert check(T.gelu_forward, T.gelu_backward, [x])


@pytest.mark.parametrize("idx_shape", [(4,), (2, 5), (3, 1)])
def test_embedding_pair(rng, idx_shape):
    weight = rng.standard_normal((6, 4))
    idx = rng.integers(0, 6, idx_shape)
    idx.flat[0] = idx.flat[-1]  # at least one id used twice: the scatter must add, not overwrite
    assert check(T.embedding_forward, T.embedding_backward, [weight], idx=idx)


@pytest.mark.parametrize("y_lead", [(2, 3), (3,), ()])
def test_add_pair(rng, y_lead):
    x = rng.standard_normal((2, 3, 4))
    y = rng.standard_normal((*y_lead, 4))
    assert check(T.add_forward, T.add_backward, [x, y], names=["x", "y"])


@pytest.mark.parametrize("lead", [(7,), (2, 5)])
def test_token_cross_entropy_pair(rng, lead):
    logits = rng.standard_normal((*lead, 11)) * 3
    targets = rng.integers(0, 11, lead)
    assert check(T.token_cross_entropy_forward, T.token_cross_entropy_backward, [logits], targets=targets)


def test_token_cross_entropy_pair_ignore_index(rng):
    logits = rng.standard_normal((2, 5, 11))
    targets = rng.integers(0, 11, (2, 5))
    targets[1, 2:] = -100
    report = check(T.token_cross_entropy_forward, T.token_cross_entropy_backward, [logits], targets=targets)
    assert report
    _, cache = T.token_cross_entropy_forward(logits, targets)
    (dlogits,) = T.token_cross_entropy_backward(np.float64(1.0), cache)
    assert not dlogits[1, 2:].any()


# ------------------------------------------------------------------------------ planted bugs


def ln_missing_projection(d_out, cache):
    norm_x, std, scale = cache
    g = d_out * scale
    return (g - g.mean(-1, keepdims=True)) / std, (d_out * norm_x).sum((0,)), d_out.sum(0)


def ln_dscale_without_norm(d_out, cache):
    dx, _, dshift = T.layer_norm_backward(d_out, cache)
    return dx, d_out.sum(0), dshift


def ln_dx_ignores_scale(d_out, cache):
    norm_x, std, scale = cache
    return T.layer_norm_backward(d_out, (norm_x, std, np.ones_like(scale)))[0], *T.layer_norm_backward(d_out, cache)[1:]


def gelu_missing_chain_term(d_out, cache):
    x, t = cache
    c = T.GELU_SQRT_2_OVER_PI
    return (d_out * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c),)


def gelu_one_minus_t(d_out, cache):
    x, t = cache
    c, a = T.GELU_SQRT_2_OVER_PI, T.GELU_CUBIC
    return (d_out * (0.5 * (1 + t) + 0.5 * x * (1 - t) * c * (1 + 3 * a * x * x)),)


def gelu_constant_off(d_out, cache):
    """sqrt(2/pi) off by 1e-4 relative in the backward only (the check's design resolution)."""
    x, t = cache
    c, a = math.sqrt(2 / math.pi) * (1 + 1e-4), T.GELU_CUBIC
    return (d_out * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x)),)


def embedding_overwrites(d_out, cache):
    idx, shape = cache
    dweight = np.zeros(shape)
    dweight[idx.reshape(-1)] = d_out.reshape(-1, shape[1])  # a repeated id keeps only its last row
    return (dweight,)


def add_y_not_summed(d_out, cache):
    return d_out, d_out[0]


def add_y_mean_not_sum(d_out, cache):
    return d_out, d_out.mean(0)


def ce_no_mean(d_out, cache):
    count = cache[4]
    return T.token_cross_entropy_backward(d_out * count, cache)


def ce_ignored_not_zeroed(d_out, cache):
    exp, sum_exp, safe, counted, count, shape, spent = cache
    return T.token_cross_entropy_backward(d_out, (exp, sum_exp, safe, np.ones_like(counted), count, shape, spent))


def ce_sign_flip(d_out, cache):
    return (-T.token_cross_entropy_backward(d_out, cache)[0],)


def _ln_inputs(rng):
    return [rng.standard_normal((5, 6)) * 2, rng.standard_normal(6), rng.standard_normal(6)], {}


def _gelu_inputs(rng):
    return [rng.standard_normal((4, 6)) * 2], {}


def _emb_inputs(rng):
    return [rng.standard_normal((6, 3))], {"idx": np.array([[1, 4, 1], [5, 1, 0]])}


def _add_inputs(rng):
    return [rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))], {}


def _ce_inputs(rng):
    targets = rng.integers(0, 9, (2, 4))
    targets[0, 0] = -100
    return [rng.standard_normal((2, 4, 9))], {"targets": targets}


PLANTED = [
    (T.layer_norm_forward, ln_missing_projection, _ln_inputs),
    (T.layer_norm_forward, ln_dscale_without_norm, _ln_inputs),
    (T.layer_norm_forward, ln_dx_ignores_scale, _ln_inputs),
    (T.gelu_forward, gelu_missing_chain_term, _gelu_inputs),
    (T.gelu_forward, gelu_one_minus_t, _gelu_inputs),
    (T.gelu_forward, gelu_constant_off, _gelu_inputs),
    (T.embedding_forward, embedding_overwrites, _emb_inputs),
    (T.add_forward, add_y_not_summed, _add_inputs),
    (T.add_forward, add_y_mean_not_sum, _add_inputs),
    (T.token_cross_entropy_forward, ce_no_mean, _ce_inputs),
    (T.token_cross_entropy_forward, ce_ignored_not_zeroed, _ce_inputs),
    (T.token_cross_entropy_forward, ce_sign_flip, _ce_inputs),
]


@pytest.mark.parametrize("forward,broken,make", PLANTED, ids=[p[1].__name__ for p in PLANTED])
def test_planted_bug_is_rejected(rng, forward, broken, make):
    inputs, kwargs = make(rng)
    report = check(forward, broken, inputs, **kwargs)
    assert not report.passed, f"{broken.__name__} passed the gradient check:\n{report}"
    with pytest.raises(npattn.GradcheckError):
        gradcheck_stage(forward, broken, inputs, kwargs=kwargs)


# ------------------------------------------------------------------------------ values and errors


def test_gelu_constant_is_the_float32_square_root():
    assert T.GELU_SQRT_2_OVER_PI == float(np.sqrt(np.float32(2 / np.pi)))
    assert T.GELU_SQRT_2_OVER_PI != float(np.float32(math.sqrt(2 / math.pi)))


def test_layer_norm_known_values():
    out, _ = T.layer_norm_forward(np.array([[1.0, 2.0, 3.0, 6.0]]), np.ones(4), np.zeros(4))
    # mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5
    np.testing.assert_allclose(out, [[-2, -1, 0, 3]] / np.sqrt(3.5 + 1e-5), rtol=1e-15)


def test_cross_entropy_uniform_logits_give_log_v():
    loss, _ = T.token_cross_entropy_forward(np.zeros((3, 4, 50)), np.zeros((3, 4), dtype=int))
    assert float(loss) == pytest.approx(math.log(50), rel=1e-15)


def test_cross_entropy_all_ignored_is_nan():
    loss, cache = T.token_cross_entropy_forward(np.zeros((2, 5)), np.full(2, -100))
    assert np.isnan(loss)
    assert not T.token_cross_entropy_backward(np.float64(1.0), cache)[0].any()


def test_cross_entropy_backward_once_per_forward(rng):
    logits = rng.standard_normal((3, 5))
    _, cache = T.token_cross_entropy_forward(logits, [0, 1, 2])
    (dlogits,) = T.token_cross_entropy_backward(np.float64(1.0), cache)
    assert np.allclose(dlogits.sum(axis=-1), 0)
    with pytest.raises(npattn.BackwardError, match="run token_cross_entropy_forward again"):
        T.token_cross_entropy_backward(np.float64(1.0), cache)


def test_embedding_backward_is_a_scatter_add():
    (dweight,) = T.embedding_backward(np.ones((1, 3, 2)), T.embedding_forward(np.zeros((4, 2)), [[2, 0, 2]])[1])
    np.testing.assert_array_equal(dweight, [[1, 1], [0, 0], [2, 2], [0, 0]])


LN_CACHE = T.layer_norm_forward(np.zeros((2, 4)), np.ones(4), np.zeros(4))[1]
CE_CACHE = T.token_cross_entropy_forward(np.zeros((2, 5)), np.array([1, 2]))[1]


@pytest.mark.parametrize(
    "call,error,fragment",
    [
        (lambda: T.layer_norm_forward(np.zeros((2, 4)), np.ones(3), np.zeros(4)), npattn.ShapeError, "scale (3,)"),
        (lambda: T.layer_norm_backward(np.zeros((2, 5)), LN_CACHE), npattn.ShapeError, "(2, 4)"),
        (lambda: T.gelu_backward(np.zeros(3), T.gelu_forward(np.zeros(4))[1]), npattn.ShapeError, "got (3,)"),
        (lambda: T.embedding_forward(np.zeros(4), [0]), npattn.ShapeError, "got shape (4,)"),
        (lambda: T.embedding_forward(np.zeros((4, 2)), [0.0]), npattn.DTypeError, "got dtype float64"),
        (lambda: T.embedding_forward(np.zeros((4, 2)), [0, 4]), npattn.ConfigError, "[0, 4), got values from 0 to 4"),
        (lambda: T.embedding_forward(np.zeros((4, 2)), [-1]), npattn.ConfigError, "from -1"),
        (lambda: T.add_forward(np.zeros((2, 3)), np.zeros((2, 1))), npattn.ShapeError, "y (2, 1)"),
        (lambda: T.token_cross_entropy_forward(np.zeros((2, 3, 5)), [[0] * 4] * 2), npattn.ShapeError, "(2, 3)"),
        (lambda: T.token_cross_entropy_forward(np.zeros((2, 5)), np.array([1, 5])), npattn.ConfigError, "[0, 5)"),
        (lambda: T.token_cross_entropy_forward(np.zeros((2, 5)), np.array([1.0, 2.0])), npattn.DTypeError, "integer"),
        (lambda: T.token_cross_entropy_backward(np.ones(2), CE_CACHE), npattn.ShapeError, "scalar"),
    ],
)
def test_bad_input(call, error, fragment):
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------ PyTorch


@pytest.mark.torch
def test_forwards_and_gradients_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 5, 8)) * 2
    scale, shift = rng.standard_normal(8), rng.standard_normal(8)
    xt, st, sht = (torch.tensor(a, requires_grad=True) for a in (x, scale, shift))
    G = rng.standard_normal(x.shape)
    # The book's LayerNorm and GELU, written as the book writes them.
    mean = xt.mean(dim=-1, keepdim=True)
    var = xt.var(dim=-1, keepdim=True, unbiased=False)
    ln_t = st * ((xt - mean) / torch.sqrt(var + 1e-5)) + sht
    ln_t.backward(torch.tensor(G))
    ln, cache = T.layer_norm_forward(x, scale, shift)
    for ours, theirs in zip((ln, *T.layer_norm_backward(G, cache)), (ln_t, xt.grad, st.grad, sht.grad)):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-12, atol=1e-13)

    xt = torch.tensor(x, requires_grad=True)
    gelu_t = 0.5 * xt * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (xt + 0.044715 * torch.pow(xt, 3))))
    gelu_t.backward(torch.tensor(G))
    gelu, cache = T.gelu_forward(x)
    np.testing.assert_allclose(gelu, gelu_t.detach().numpy(), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(T.gelu_backward(G, cache)[0], xt.grad.numpy(), rtol=1e-12, atol=1e-13)
    assert torch.sqrt(torch.tensor(2.0 / torch.pi)).item() == T.GELU_SQRT_2_OVER_PI

    logits = rng.standard_normal((2, 5, 13)) * 2
    targets = rng.integers(0, 13, (2, 5))
    targets[0, 3] = -100
    lt = torch.tensor(logits, requires_grad=True)
    loss_t = torch.nn.functional.cross_entropy(lt.flatten(0, 1), torch.tensor(targets).flatten())
    loss_t.backward()
    loss, cache = T.token_cross_entropy_forward(logits, targets)
    assert float(loss) == pytest.approx(loss_t.item(), rel=1e-14)
    np.testing.assert_allclose(T.token_cross_entropy_backward(np.float64(1.0), cache)[0], lt.grad.numpy(), atol=1e-16)

    weight = rng.standard_normal((7, 3))
    idx = np.array([[1, 6, 1, 0], [6, 6, 2, 3]])
    wt = torch.tensor(weight, requires_grad=True)
    G = rng.standard_normal((2, 4, 3))
    torch.nn.functional.embedding(torch.tensor(idx), wt).backward(torch.tensor(G))
    out, cache = T.embedding_forward(weight, idx)
    np.testing.assert_array_equal(out, weight[idx])
    np.testing.assert_allclose(T.embedding_backward(G, cache)[0], wt.grad.numpy(), rtol=1e-15, atol=1e-15)
