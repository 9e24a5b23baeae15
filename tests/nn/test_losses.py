"""Losses: known values, PyTorch's reduction semantics, gradient checks, each check proven to fail."""

import numpy as np
import pytest

import npattn
from npattn.gradcheck import gradcheck_stage
from npattn.nn import losses as L


def log_softmax_reference(z, axis):
    """log-sum-exp in float64 via logaddexp.reduce: an independent stable reference."""
    return z - np.logaddexp.reduce(z, axis=axis, keepdims=True)


def test_mse_known_values():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    y = np.array([[1.0, 0.0], [0.0, 4.0]])
    assert L.mse_loss(x, y) == pytest.approx((0 + 4 + 9 + 0) / 4)
    assert L.mse_loss(x, y, reduction="sum") == 13.0
    np.testing.assert_array_equal(L.mse_loss(x, y, reduction="none"), [[0, 4], [9, 0]])
    crit = L.MSELoss()
    assert crit(x, y) == 3.25
    np.testing.assert_array_equal(crit.backward(), 2 * (x - y) / 4)


def test_cross_entropy_known_values():
    logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    target = np.array([0, 1])
    ref = -np.mean(log_softmax_reference(logits, 1)[[0, 1], [0, 1]])
    assert L.cross_entropy(logits, target) == pytest.approx(ref, abs=1e-15)
    assert L.cross_entropy(logits, target, reduction="sum") == pytest.approx(2 * ref, abs=1e-15)
    # uniform logits: log(C)
    assert L.cross_entropy(np.zeros((4, 5)), np.arange(4)) == pytest.approx(np.log(5))
    # 1-D input: classes on axis 0, a 0-d target
    assert L.cross_entropy(logits[0], np.array(0)) == pytest.approx(-log_softmax_reference(logits[0], 0)[0])


def test_cross_entropy_probabilities_equal_indices_for_one_hot(rng):
    logits = rng.standard_normal((5, 3, 4))  # (N, C, d1): classes on axis 1
    target = rng.integers(0, 3, size=(5, 4))
    one_hot = np.moveaxis(np.eye(3)[target], -1, 1)
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_allclose(
            L.cross_entropy(logits, target, reduction), L.cross_entropy(logits, one_hot, reduction), rtol=1e-14
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_is_stable_at_extreme_logits(dtype):
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4 + 5]], dtype=dtype)
    target = np.array([1, 2])
    per = L.cross_entropy(logits, target, reduction="none")
    ref = -log_softmax_reference(logits.astype(np.float64), 1)[[0, 1], [1, 2]]
    assert np.all(np.isfinite(per))
    np.testing.assert_allclose(per, ref, rtol=1e-6)
    crit = L.CrossEntropyLoss()
    crit(logits, target)
    assert np.all(np.isfinite(crit.backward()))


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5)])
def test_mse_gradcheck(rng, reduction, shape):
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    gradcheck_stage(L.mse_loss_forward, L.mse_loss_backward, [x], kwargs={"target": y, "reduction": reduction})


CE_CASES = [(5,), (4, 3), (2, 3, 5), (2, 4, 3, 2)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", CE_CASES)
def test_cross_entropy_gradcheck_indices(rng, reduction, shape):
    logits = 3 * rng.standard_normal(shape)
    axis = 0 if len(shape) == 1 else 1
    target = rng.integers(0, shape[axis], size=shape[:axis] + shape[axis + 1 :])
    gradcheck_stage(
        L.cross_entropy_forward, L.cross_entropy_backward, [logits], kwargs={"target": target, "reduction": reduction}
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", CE_CASES)
def test_cross_entropy_gradcheck_probabilities(rng, reduction, shape):
    logits = 3 * rng.standard_normal(shape)
    axis = 0 if len(shape) == 1 else 1
    probs = npattn.nn.functional.softmax(rng.standard_normal(shape), axis=axis)
    gradcheck_stage(
        L.cross_entropy_forward, L.cross_entropy_backward, [logits], kwargs={"target": probs, "reduction": reduction}
    )


# Planted bugs: each is a plausible mistake in a loss backward; the gradient check must reject it.
def mse_no_mean(d, cache):
    (g,) = L.mse_loss_backward(d, cache)
    return (g * cache[0].size,)


def mse_no_two(d, cache):
    (g,) = L.mse_loss_backward(d, cache)
    return (g / 2,)


def ce_sign(d, cache):
    (g,) = L.cross_entropy_backward(d, cache)
    return (-g,)


def ce_missing_softmax(d, cache):
    _, probs, _, _, count = cache
    return (-probs * np.asarray(d) / count,)


def ce_wrong_count(d, cache):
    (g,) = L.cross_entropy_backward(d, cache)
    return (g * 2,)


@pytest.mark.parametrize(
    "forward,bug",
    [
        (L.mse_loss_forward, mse_no_mean),
        (L.mse_loss_forward, mse_no_two),
        (L.cross_entropy_forward, ce_sign),
        (L.cross_entropy_forward, ce_missing_softmax),
        (L.cross_entropy_forward, ce_wrong_count),
    ],
)
def test_planted_bugs_are_rejected(rng, forward, bug):
    x = rng.standard_normal((4, 3))
    target = rng.integers(0, 3, size=4) if forward is L.cross_entropy_forward else rng.standard_normal((4, 3))
    report = gradcheck_stage(forward, bug, [x], kwargs={"target": target}, raise_exception=False)
    assert not report.passed


def test_module_matches_functional_and_backward_scales(rng):
    logits, target = rng.standard_normal((6, 4)), rng.integers(0, 4, size=6)
    crit = L.CrossEntropyLoss(reduction="sum")
    assert crit(logits, target) == L.cross_entropy(logits, target, "sum")
    np.testing.assert_allclose(crit.backward(2.5), 2.5 * crit.backward())
    assert "reduction='sum'" in repr(crit)


def test_bad_arguments_raise_clear_errors(rng):
    with pytest.raises(npattn.ConfigError, match="reduction must be one of"):
        L.MSELoss(reduction="avg")
    with pytest.raises(npattn.ShapeError, match=r"target shape \(3,\) differs from input shape \(4,\)"):
        L.mse_loss(np.zeros(4), np.zeros(3))
    with pytest.raises(npattn.ConfigError, match=r"target classes must lie in \[0, 3\)"):
        L.cross_entropy(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(npattn.ShapeError, match="class-index target must have shape"):
        L.cross_entropy(np.zeros((2, 3)), np.array([0, 1, 2]))
    with pytest.raises(npattn.ShapeError, match="class probabilities"):
        L.cross_entropy(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(npattn.BackwardError):
        L.MSELoss().backward()
    crit = L.MSELoss(reduction="none")
    crit(np.zeros(3), np.ones(3))
    with pytest.raises(npattn.ShapeError, match=r"expected shape \(3,\)"):
        crit.backward()  # a scalar d_loss for an unreduced loss


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_torch_parity(rng, reduction):
    torch = pytest.importorskip("torch")
    logits = rng.standard_normal((3, 5, 2))
    target = rng.integers(0, 5, size=(3, 2))
    probs = npattn.nn.functional.softmax(rng.standard_normal((3, 5, 2)), axis=1)
    y = rng.standard_normal((3, 5, 2))
    for crit, torch_fn, tgt, torch_tgt in [
        (L.CrossEntropyLoss(reduction), torch.nn.functional.cross_entropy, target, torch.from_numpy(target)),
        (L.CrossEntropyLoss(reduction), torch.nn.functional.cross_entropy, probs, torch.from_numpy(probs)),
        (L.MSELoss(reduction), torch.nn.functional.mse_loss, y, torch.from_numpy(y)),
    ]:
        t_in = torch.from_numpy(logits.copy()).requires_grad_()
        t_loss = torch_fn(t_in, torch_tgt, reduction=reduction)
        G = rng.standard_normal(tuple(t_loss.shape))
        t_loss.backward(torch.from_numpy(G))
        loss = crit(logits, tgt)
        np.testing.assert_allclose(loss, t_loss.detach().numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(
            crit.backward(G if reduction == "none" else float(G)), t_in.grad.numpy(), rtol=1e-12, atol=1e-15
        )
