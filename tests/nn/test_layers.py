"""Linear and Dropout: PyTorch's layout, init and semantics, gradient checks, clear errors."""

from pathlib import Path

import numpy as np
import pytest
from planted import plant

import npattn
from npattn.gradcheck import gradcheck_stage

TORCH_RANDOM = np.load(Path(__file__).resolve().parents[1] / "fixtures" / "torch_random.npz", allow_pickle=False)


# ------------------------------------------------------------------ Linear


@pytest.mark.parametrize("in_features,out_features,seed", [(3, 2, 789), (7, 5, 1), (100, 16, 2)])
def test_linear_init_is_bit_identical_to_torch(in_features, out_features, seed):
    layer = npattn.Linear(in_features, out_features, rng=seed)
    key = f"linear_{in_features}_{out_features}_seed{seed}"
    np.testing.assert_array_equal(layer.weight.data, TORCH_RANDOM[f"{key}_weight"])
    np.testing.assert_array_equal(layer.bias.data, TORCH_RANDOM[f"{key}_bias"])
    assert layer.weight.shape == (out_features, in_features) and layer.weight.dtype == np.float32


def test_linear_computes_x_weight_transposed_plus_bias(rng):
    layer = npattn.Linear(4, 3, rng=rng, dtype=np.float64)
    for shape in [(4,), (5, 4), (2, 5, 4), (2, 3, 5, 4)]:
        x = rng.standard_normal(shape)
        y = layer(x)
        assert y.shape == (*shape[:-1], 3)
        np.testing.assert_allclose(y, np.einsum("...i,oi->...o", x, layer.weight.data) + layer.bias.data, rtol=1e-13)


def test_linear_without_bias():
    layer = npattn.Linear(3, 2, bias=False, rng=0)
    assert layer.bias is None
    assert list(layer.state_dict()) == ["weight"]
    assert repr(layer).startswith("Linear(in_features=3, out_features=2, bias=False")
    assert list(npattn.Linear(3, 2, rng=0).state_dict()) == ["weight", "bias"]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4,), (6, 4), (2, 5, 4)])
def test_linear_gradcheck(bias, shape):
    layer = npattn.Linear(4, 3, bias=bias, rng=np.random.default_rng(0), dtype=np.float64)
    x = np.random.default_rng(1).standard_normal(shape)
    report = npattn.gradcheck(layer, x)
    assert [c.name for c in report.checks] == (["weight", "bias", "x"] if bias else ["weight", "x"])
    assert all(c.margin >= 100 for c in report.checks), report


def test_linear_backward_accumulates(rng):
    layer = npattn.Linear(4, 3, rng=rng, dtype=np.float64)
    x, g = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    layer(x)
    layer.backward(g)
    np.testing.assert_allclose(layer.weight.grad, g.T @ x, rtol=1e-13)
    np.testing.assert_allclose(layer.bias.grad, g.sum(axis=0), rtol=1e-13)
    layer.backward(g)
    np.testing.assert_allclose(layer.weight.grad, 2 * g.T @ x, rtol=1e-13)


def _transposed_weight_grad(d_out, cache):
    x, W = cache
    dx = d_out @ W.T
    return dx, (x.reshape(-1, x.shape[-1]).T @ d_out.reshape(-1, d_out.shape[-1])).T


def _bias_grad_mean(d_out, cache):
    return d_out, d_out.reshape(-1, d_out.shape[-1]).mean(axis=0)


@pytest.mark.parametrize(
    "attr,broken", [("project_backward", _transposed_weight_grad), ("bias_backward", _bias_grad_mean)]
)
def test_linear_gradcheck_rejects_planted_bugs(monkeypatch, attr, broken):
    layer = npattn.Linear(4, 4, rng=np.random.default_rng(0), dtype=np.float64)  # square: a transposed grad fits
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    assert npattn.gradcheck(layer, x)
    plant(monkeypatch, attr, broken)
    with pytest.raises(npattn.GradcheckError):
        npattn.gradcheck(layer, x)


@pytest.mark.parametrize(
    "args,kwargs", [((0, 2), {}), ((3, -1), {}), ((3.0, 2), {}), ((3, 2), {"bias": "no"}), ((3, 2), {"bias": 2})]
)
def test_linear_constructor_errors(args, kwargs):
    with pytest.raises(npattn.ConfigError):
        npattn.Linear(*args, **kwargs)


def test_linear_input_errors():
    layer = npattn.Linear(3, 2, rng=0)
    with pytest.raises(npattn.ShapeError, match=r"expected shape \(\.\.\., in_features=3\), got shape \(6, 4\)"):
        layer(np.zeros((6, 4)))
    with pytest.raises(npattn.ShapeError, match=r"got shape \(\)"):
        layer(np.float32(1.0))
    with pytest.raises(npattn.DTypeError):
        layer(np.zeros((2, 3), dtype=complex))
    with pytest.raises(npattn.BackwardError):
        layer.backward(np.zeros((6, 2)))
    layer(np.zeros((6, 3)))
    with pytest.raises(npattn.ShapeError, match=r"expected shape \(6, 2\)"):
        layer.backward(np.zeros((6, 3)))


# ------------------------------------------------------------------ Dropout


def test_dropout_eval_and_p_zero_are_identity(rng):
    x = rng.standard_normal((3, 4, 4))
    g = rng.standard_normal(x.shape)
    for layer in (npattn.Dropout(0.5, rng=0).eval(), npattn.Dropout(0.0, rng=0)):
        np.testing.assert_array_equal(layer(x), x)
        np.testing.assert_array_equal(layer.backward(g), g)
        assert layer.keep_mask(x.shape) is None


def test_dropout_training_is_inverted_dropout_with_the_same_mask_in_backward(rng):
    layer = npattn.Dropout(0.5, rng=1)
    x = rng.random((50, 40)) + 0.5  # no zeros in x, so zeros in the output are dropped entries
    out = layer(x)
    keep = out != 0
    assert 0.4 < keep.mean() < 0.6
    np.testing.assert_allclose(out[keep], 2 * x[keep], rtol=1e-15)
    g = rng.standard_normal(x.shape)
    np.testing.assert_array_equal(layer.backward(g), g * keep * 2.0)
    assert not np.array_equal(layer(x) != 0, keep), "a fresh mask per forward"


def test_dropout_is_seeded_through_its_rng(rng):
    x = rng.random((6, 6)) + 0.5
    np.testing.assert_array_equal(npattn.Dropout(0.3, rng=5)(x), npattn.Dropout(0.3, rng=5)(x))
    np.testing.assert_array_equal(npattn.Dropout(0.3, rng=npattn.TorchGenerator(5))(x), npattn.Dropout(0.3, rng=5)(x))


def test_dropout_fixed_keep(rng):
    layer = npattn.Dropout(0.25, rng=0)
    x = rng.standard_normal((2, 5, 5))
    layer.fixed_keep = layer.keep_mask(x.shape)
    first = layer(x)
    np.testing.assert_array_equal(layer(x), first)
    np.testing.assert_allclose(first, x * layer.fixed_keep / 0.75, rtol=1e-15)
    layer.fixed_keep = np.tri(5, dtype=bool)  # broadcast over the batch
    np.testing.assert_allclose(layer(x), x * np.tri(5) / 0.75, rtol=1e-15)
    np.testing.assert_array_equal(layer.eval()(x), x)  # eval mode wins over a fixed mask
    layer.train()
    with pytest.raises(npattn.DTypeError, match="bool"):
        layer.fixed_keep = np.ones((5, 5))
    layer.fixed_keep = np.ones((4, 5), dtype=bool)
    with pytest.raises(npattn.ShapeError, match=r"\(4, 5\).*\(2, 5, 5\)"):
        layer(x)
    layer.fixed_keep = None
    assert not np.array_equal(layer(x), layer(x))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_gradcheck_with_a_fixed_mask(rng, p):
    layer = npattn.Dropout(p, rng=0)
    x = rng.standard_normal((2, 4, 4))
    layer.fixed_keep = layer.keep_mask(x.shape)

    def forward(a):
        return layer(a), None

    gradcheck_stage(forward, lambda g, _: (layer.backward(g),), [x])


@pytest.mark.parametrize("p", [1.0, -0.1, "0.5", None, True])
def test_dropout_constructor_errors(p):
    with pytest.raises(npattn.ConfigError):
        npattn.Dropout(p)


def test_linear_keeps_its_own_copy_of_x():
    """Editing the caller's array between forward and backward cannot change the weight gradient."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3))
    g = rng.standard_normal((5, 2))
    layer, fresh = npattn.Linear(3, 2, rng=0, dtype=np.float64), npattn.Linear(3, 2, rng=0, dtype=np.float64)
    layer(x)
    fresh(x.copy())
    x[...] = 7.0
    layer.backward(g)
    fresh.backward(g)
    np.testing.assert_array_equal(layer.weight.grad, fresh.weight.grad)
