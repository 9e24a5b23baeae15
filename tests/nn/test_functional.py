"""Every stage pair gradient-checked in isolation (float64, central differences, random G),
and each check shown to reject a planted bug in that stage's backward."""

import math

import numpy as np
import planted
import pytest

import npattn
from npattn.gradcheck import gradcheck_stage
from npattn.nn import functional as F

SHAPES = [  # (batch or None, n, d_in, d_out)
    (None, 1, 3, 2),
    (None, 6, 3, 2),
    (None, 5, 4, 7),
    (None, 4, 3, 1),
    (None, 33, 5, 4),
    (2, 6, 3, 2),
]


def lead(batch):
    return () if batch is None else (batch,)


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
def test_project_pair(rng, batch, n, d_in, d_out):
    x = rng.standard_normal((*lead(batch), n, d_in))
    W = rng.standard_normal((d_in, d_out))
    gradcheck_stage(F.project_forward, F.project_backward, [x, W], names=["x", "W"])


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
def test_bias_pair(rng, batch, n, d_in, d_out):
    y = rng.standard_normal((*lead(batch), n, d_out))
    b = rng.standard_normal(d_out)
    gradcheck_stage(F.bias_forward, F.bias_backward, [y, b], names=["y", "bias"])


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
def test_scores_pair(rng, batch, n, d_in, d_out):
    q = rng.standard_normal((*lead(batch), n, d_out))
    k = rng.standard_normal((*lead(batch), n, d_out))
    gradcheck_stage(F.scores_forward, F.scores_backward, [q, k], names=["queries", "keys"])


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
def test_softmax_pair(rng, batch, n, d_in, d_out):
    s = rng.standard_normal((*lead(batch), n, n)) * 3
    gradcheck_stage(F.softmax_forward, F.softmax_backward, [s], kwargs={"scale": 1 / math.sqrt(d_out)})


@pytest.mark.parametrize("n", [1, 2, 6, 9])
def test_mask_then_softmax_pair(rng, n):
    s = rng.standard_normal((2, n, n))
    mask = F.causal_mask(n)

    def forward(scores):
        masked, c_mask = F.mask_forward(scores, mask)
        weights, c_soft = F.softmax_forward(masked, 0.5)
        return weights, (c_mask, c_soft)

    def backward(d_weights, cache):
        c_mask, c_soft = cache
        (d_masked,) = F.softmax_backward(d_weights, c_soft)
        return F.mask_backward(d_masked, c_mask)

    gradcheck_stage(forward, backward, [s])
    _, cache = forward(s)
    (grad,) = backward(rng.standard_normal(s.shape), cache)
    assert np.all(grad[:, mask] == 0.0), "masked positions must get exactly zero gradient"


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_pair(rng, p):
    a = rng.random((2, 5, 5))
    keep = rng.random(a.shape) >= p
    gradcheck_stage(F.dropout_forward, F.dropout_backward, [a], kwargs={"keep": keep, "p": p})


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
def test_context_pair(rng, batch, n, d_in, d_out):
    a = F.softmax(rng.standard_normal((*lead(batch), n, n)))
    v = rng.standard_normal((*lead(batch), n, d_out))
    gradcheck_stage(F.context_forward, F.context_backward, [a, v], names=["attn_weights", "values"])


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_head_reshape_pairs(rng, num_heads):
    x = rng.standard_normal((2, 3, 8))
    gradcheck_stage(F.split_heads_forward, F.split_heads_backward, [x], kwargs={"num_heads": num_heads})
    h = rng.standard_normal((2, num_heads, 3, 8 // num_heads))
    gradcheck_stage(F.merge_heads_forward, F.merge_heads_backward, [h])
    merged, _ = F.merge_heads_forward(F.split_heads_forward(x, num_heads)[0])
    np.testing.assert_array_equal(merged, x)


def test_concat_pair(rng):
    arrays = [rng.standard_normal((2, 3, w)) for w in (2, 1, 3)]
    gradcheck_stage(lambda *a: F.concat_forward(a), F.concat_backward, arrays)


@pytest.mark.parametrize("batch,n,d_in,d_out", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_composite(rng, batch, n, d_in, d_out, causal):
    q, k, v = (rng.standard_normal((*lead(batch), n, d_out)) for _ in range(3))
    mask = F.causal_mask(n) if causal else None
    gradcheck_stage(F.attention_forward, F.attention_backward, [q, k, v], kwargs={"mask": mask})


def test_softmax_is_stable_at_extremes():
    for dtype in (np.float32, np.float64):
        s = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [5e3, 5e3, -1e4]], dtype=dtype)
        a = F.softmax(s)
        assert np.all(np.isfinite(a)) and a.dtype == dtype
        np.testing.assert_allclose(a, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0]], atol=1e-7)
        (ds,) = F.softmax_backward(np.ones_like(a), (a, 1.0))
        assert np.all(np.isfinite(ds))


def test_softmax_of_empty_rows():
    assert F.softmax(np.zeros((0, 0))).shape == (0, 0)


# ------------------------------------------------------------------ planted bugs, stage level


STAGE_BUGS = {
    "softmax sign flip": ("softmax", planted.softmax_sign_flip),
    "softmax wrong axis": ("softmax", planted.softmax_wrong_axis),
    "softmax missing scale": ("softmax", planted.softmax_missing_scale),
    "scores dK missing transpose": ("scores", planted.scores_dK_missing_transpose),
    "context dV missing transpose": ("context", planted.context_dV_missing_transpose),
    "context dA reshaped, not transposed": ("context", planted.context_dA_reshaped_not_transposed),
}


@pytest.mark.parametrize("bug", sorted(STAGE_BUGS))
def test_stage_check_rejects_planted_bug(rng, bug):
    stage, broken = STAGE_BUGS[bug]
    n, k = 5, 3
    if stage == "softmax":
        args, fwd, kwargs = [rng.standard_normal((n, n))], F.softmax_forward, {"scale": 0.5}
    elif stage == "scores":
        args, fwd, kwargs = [rng.standard_normal((n, k)), rng.standard_normal((n, k))], F.scores_forward, {}
    else:
        args, fwd, kwargs = [F.softmax(rng.standard_normal((n, n))), rng.standard_normal((n, n))], F.context_forward, {}
    with pytest.raises(npattn.GradcheckError):
        gradcheck_stage(fwd, broken, args, kwargs=kwargs)


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1, float("nan")])
def test_dropout_forward_refuses_p_outside_0_1(p):
    with pytest.raises(npattn.ConfigError, match=r"p must lie in \[0, 1\)"):
        F.dropout_forward(np.ones((2, 2)), np.ones((2, 2), bool), p)


# ----------------------------------------------------------------------------------------------
# Every stage's array arguments: a torch tensor is taken as its ndarray (as the modules take it);
# anything else that is not an ndarray gets a DTypeError naming the stage and the argument.

def _takes_arrays(name):
    import inspect

    return any("ndarray" in str(p.annotation) for p in inspect.signature(getattr(F, name)).parameters.values())


STAGES = [name for name in F.__all__ if hasattr(getattr(F, name), "__wrapped__") and _takes_arrays(name)]


def test_every_stage_with_array_arguments_is_checked():
    assert len(STAGES) >= 28, STAGES
    plain = [name for name in F.__all__ if callable(getattr(F, name)) and not hasattr(getattr(F, name), "__wrapped__")]
    assert sorted(plain) == ["Recorder", "causal_mask"]  # token_cross_entropy_backward: its cache is checked


@pytest.mark.parametrize("bad", [None, "x", True, [1.0], np.ones(3, bool)])
def test_token_cross_entropy_backward_refuses_a_d_loss_that_is_not_a_number(bad):
    _, cache = F.token_cross_entropy_forward(np.zeros((2, 3)), np.array([0, 1]))
    with pytest.raises((npattn.DTypeError, npattn.ShapeError), match="token_cross_entropy_backward: "):
        F.token_cross_entropy_backward(bad, cache)
    (d,) = F.token_cross_entropy_backward(np.float32(1.0), cache)  # the refusal did not spend the buffers
    assert np.isfinite(d).all()


@pytest.mark.parametrize("name", STAGES)
@pytest.mark.parametrize("bad", [[[1.0, 2.0]], 2.0, None, "x"])
def test_every_stage_refuses_non_arrays_clearly(name, bad):
    import inspect

    stage = getattr(F, name)
    params = list(inspect.signature(stage).parameters.values())
    first = next(p for p in params if "ndarray" in str(p.annotation))
    if bad is None and "None" in str(first.annotation):
        pytest.skip("None is a valid value here")
    args = [np.ones((2, 2))] * len([p for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD])
    kind = "list or tuple of ndarrays" if "Sequence" in str(first.annotation) else "NumPy ndarray"
    position = params.index(first)
    args[position] = bad
    with pytest.raises(npattn.DTypeError, match=rf"{name}: {first.name}(\[0\])? must be a (NumPy ndarray|{kind})"):
        stage(*args)


def test_stages_take_torch_tensors_as_the_modules_do(rng):
    torch = pytest.importorskip("torch")
    a, v = rng.random((2, 4, 5)), rng.random((2, 5, 3))
    out, _ = F.context_forward(torch.from_numpy(a), torch.from_numpy(v).requires_grad_())
    np.testing.assert_array_equal(out, F.context_forward(a, v)[0])
    x, scale, shift = rng.random((3, 4)), rng.random(4), rng.random(4)
    out, cache = F.layer_norm_forward(torch.from_numpy(x), scale, shift=torch.from_numpy(shift))
    np.testing.assert_array_equal(out, F.layer_norm_forward(x, scale, shift)[0])
    d = rng.random((3, 4))
    for got, want in zip(F.layer_norm_backward(torch.from_numpy(d), cache), F.layer_norm_backward(d, cache)):
        np.testing.assert_array_equal(got, want)
    joined, _ = F.concat_forward([torch.ones(2, 2), np.zeros((2, 1))])
    np.testing.assert_array_equal(joined, [[1, 1, 0], [1, 1, 0]])
    q = rng.random((4, 3))
    ctx, _ = F.attention_forward(q, q, q, mask=torch.from_numpy(F.causal_mask(4)))
    np.testing.assert_array_equal(ctx, F.attention_forward(q, q, q, mask=F.causal_mask(4))[0])
