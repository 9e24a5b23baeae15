"""impl= on the chapter-3 classes: the fused and tiled paths give the reference path's outputs and
gradients, pass gradient checks, keep the book's digits, and fall back to the reference path
where only it applies (dropout in training mode, a mask buffer that is not the causal mask)."""

import numpy as np
import pytest
from book_digits import MHA_OUT

import npattn

FAST = {"fused": 1e-12, "tiled": 1e-10}


def build(name, impl, seed=5, dropout=0.0, qkv_bias=True):
    rng = np.random.default_rng(seed)
    kw = {"rng": rng, "dtype": np.float64, "impl": impl}
    if name == "v2":
        return npattn.SelfAttention_v2(4, 6, qkv_bias, **kw)
    if name == "causal":
        return npattn.CausalAttention(4, 6, 40, dropout, qkv_bias, **kw)
    if name == "wrapper":
        return npattn.MultiHeadAttentionWrapper(4, 3, 40, dropout, 2, qkv_bias, **kw)
    return npattn.MultiHeadAttention(4, 6, 40, dropout, 3, qkv_bias, **kw)


def run(model, x, g):
    out = model(x)
    model.zero_grad()
    dx = model.backward(g)
    return out, dx, {name: p.grad.copy() for name, p in model.named_parameters()}


def chosen_paths(model):
    """The path each attention stage ran in the last forward: kernels.attention's cache is
    ``(chosen, inner, compute dtype, input dtypes, output shape)``, somewhere inside each module's ``_cache``."""

    def find(cache):
        if isinstance(cache, tuple):
            if len(cache) == 5 and isinstance(cache[0], str) and cache[0] in npattn.kernels.IMPLS:
                return [cache[0]]
            return [path for item in cache for path in find(item)]
        return []

    return [path for module in model.modules() for path in find(module._cache)]


@pytest.mark.parametrize("name", ["v2", "causal", "wrapper", "mha"])
@pytest.mark.parametrize("impl", sorted(FAST))
def test_fast_paths_equal_the_reference(name, impl):
    x = np.random.default_rng(0).standard_normal((2, 37, 4))
    reference = build(name, "reference")
    fast = build(name, impl)
    g = np.random.default_rng(1).standard_normal(reference(x).shape)
    out_r, dx_r, grads_r = run(reference, x, g)
    out_f, dx_f, grads_f = run(fast, x, g)
    assert set(chosen_paths(fast)) == {impl}
    tol = FAST[impl]
    np.testing.assert_allclose(out_f, out_r, rtol=0, atol=tol)
    np.testing.assert_allclose(dx_f, dx_r, rtol=0, atol=tol)
    for key in grads_r:
        np.testing.assert_allclose(grads_f[key], grads_r[key], rtol=0, atol=tol * max(1, np.abs(grads_r[key]).max()))


@pytest.mark.parametrize("impl", sorted(FAST))
@pytest.mark.parametrize("name", ["causal", "mha"])
def test_gradcheck_on_fast_paths(name, impl):
    x = np.random.default_rng(2).standard_normal((2, 9, 4))
    assert npattn.gradcheck(build(name, impl), x)


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
def test_book_digits_on_every_path(impl):
    mha = npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, rng=123, impl=impl)
    for batch_entry in mha(npattn.book_batch()):
        np.testing.assert_allclose(batch_entry, MHA_OUT, atol=1e-4)


def test_dropout_in_training_mode_runs_the_reference_path():
    model = build("mha", "tiled", dropout=0.5)
    model(np.ones((1, 5, 4)))
    assert chosen_paths(model) == ["reference"]
    model.eval()
    model(np.ones((1, 5, 4)))
    assert chosen_paths(model) == ["tiled"]


def test_a_changed_mask_buffer_is_honoured_by_every_impl():
    x = np.random.default_rng(3).standard_normal((1, 7, 4))
    outs = []
    for impl in ("reference", "fused", "tiled"):
        model = build("causal", impl)
        model.mask[...] = False  # nothing masked: every token sees the whole sequence
        outs.append(model(x))
        assert chosen_paths(model) == ["reference"]
    unmasked = build("v2", "reference")
    unmasked.load_state_dict({k: v for k, v in build("causal", "reference").state_dict().items() if k != "mask"})
    for out in outs:
        np.testing.assert_allclose(out, unmasked(x), rtol=1e-13, atol=1e-14)


def test_unknown_impl_is_a_clear_error():
    with pytest.raises(npattn.ConfigError, match="impl must be one of"):
        npattn.CausalAttention(3, 2, 6, 0.0, impl="fast")


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
@pytest.mark.parametrize(
    ("cls", "args"),
    [
        (npattn.SelfAttention_v1, (3, 4)),
        (npattn.SelfAttention_v2, (3, 4)),
        (npattn.CausalAttention, (3, 4, 6, 0.0)),
        (npattn.MultiHeadAttentionWrapper, (3, 4, 6, 0.0, 2)),
        (npattn.MultiHeadAttention, (3, 4, 6, 0.0, 2)),
    ],
)
def test_an_empty_sequence_works_on_every_path(cls, args, impl):
    model = cls(*args, rng=1, impl=impl)
    out = model(np.zeros((2, 0, 3)))
    assert out.shape == cls(*args, rng=1, impl="reference")(np.zeros((2, 0, 3))).shape
    assert model.backward(np.zeros(out.shape)).shape == (2, 0, 3)
    assert all(np.all(p.grad == 0) for p in model.parameters())
