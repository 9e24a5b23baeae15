"""The rest of chapter 3: SelfAttention_v2, CausalAttention, MultiHeadAttentionWrapper and
MultiHeadAttention. The book's digits, gradient checks (with and without bias, several head counts,
n < context_length, dropout with a fixed mask), causality, exact zeros at masked positions,
planted bugs in masking, dropout and the head split/merge, state dicts and clear errors."""

import numpy as np
import pytest
from book_digits import MHA_OUT
from planted import plant

import npattn
from npattn.nn import functional as F

ATOL = 1e-4  # the book prints 4 decimals

CAUSAL_OUT = [
    [-0.4519, 0.2216],
    [-0.5874, 0.0058],
    [-0.6300, -0.0632],
    [-0.5675, -0.0843],
    [-0.5526, -0.0981],
    [-0.5299, -0.1081],
]


def make(cls, d_in=4, d_out=4, context_length=7, dropout=0.0, num_heads=2, qkv_bias=False, seed=0):
    """A float64 model of any of the four classes, weights from a NumPy generator."""
    kwargs = {"rng": np.random.default_rng(seed), "dtype": np.float64}
    if cls is npattn.SelfAttention_v2:
        return cls(d_in, d_out, qkv_bias, **kwargs)
    if cls is npattn.CausalAttention:
        return cls(d_in, d_out, context_length, dropout, qkv_bias, **kwargs)
    return cls(d_in, d_out, context_length, dropout, num_heads, qkv_bias, **kwargs)


CAUSAL_CLASSES = [npattn.CausalAttention, npattn.MultiHeadAttentionWrapper, npattn.MultiHeadAttention]
ALL_CLASSES = [npattn.SelfAttention_v2, *CAUSAL_CLASSES]


def dropouts(model):
    return [m for m in model.modules() if isinstance(m, npattn.Dropout)]


def fix_dropout(model, b, n):
    """Training mode with every Dropout's mask drawn once and fixed."""
    model.train()
    shape = (b, model.num_heads, n, n) if isinstance(model, npattn.MultiHeadAttention) else (b, n, n)
    for d in dropouts(model):
        d.fixed_keep = d.keep_mask(shape)
    return model


# ------------------------------------------------------------------ the book's digits


def test_self_attention_v2_book_output():
    out = npattn.SelfAttention_v2(3, 2, rng=789)(npattn.book_inputs())
    expected = [
        [-0.0739, 0.0713],
        [-0.0748, 0.0703],
        [-0.0749, 0.0702],
        [-0.0760, 0.0685],
        [-0.0763, 0.0679],
        [-0.0754, 0.0693],
    ]
    assert out.shape == (6, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_causal_attention_weights_table():
    """Section 3.5.1: SelfAttention_v2's (seed 789) W_query and W_key, the mask, the softmax."""
    sa_v2 = npattn.SelfAttention_v2(3, 2, rng=789)
    ca = npattn.CausalAttention(3, 2, 6, 0.0, rng=0)
    ca.load_state_dict({**sa_v2.state_dict(), "mask": ca.mask})
    stages = {}
    ca._recorder = stages.__setitem__
    ca(npattn.book_batch()[:1])
    expected = np.zeros((6, 6))
    rows = [
        [1.0000],
        [0.5517, 0.4483],
        [0.3800, 0.3097, 0.3103],
        [0.2758, 0.2460, 0.2462, 0.2319],
        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
    ]
    for i, row in enumerate(rows):
        expected[i, : len(row)] = row
    np.testing.assert_allclose(stages["attn_weights"][0], expected, atol=ATOL)
    assert np.all(stages["attn_weights"][0][np.triu_indices(6, 1)] == 0.0)


def test_causal_attention_book_output():
    out = npattn.CausalAttention(3, 2, 6, 0.0, rng=123)(npattn.book_batch())
    assert out.shape == (2, 6, 2)
    for batch_entry in out:
        np.testing.assert_allclose(batch_entry, CAUSAL_OUT, atol=ATOL)


def test_multi_head_attention_wrapper_book_output():
    out = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=123)(npattn.book_batch())
    second_head = [
        [0.4772, 0.1063],
        [0.5891, 0.3257],
        [0.6202, 0.3860],
        [0.5478, 0.3589],
        [0.5321, 0.3428],
        [0.5077, 0.3493],
    ]
    assert out.shape == (2, 6, 4)
    for batch_entry in out:
        np.testing.assert_allclose(batch_entry, np.hstack([CAUSAL_OUT, second_head]), atol=ATOL)




def test_multi_head_attention_book_output():
    out = npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, rng=123)(npattn.book_batch())
    assert out.shape == (2, 6, 2)
    for batch_entry in out:
        np.testing.assert_allclose(batch_entry, MHA_OUT, atol=ATOL)


# ------------------------------------------------------------------ gradient checks

GRID = [  # (class, qkv_bias, num_heads, d_out, batch, n, context_length, dropout)
    (npattn.SelfAttention_v2, False, None, 3, None, 5, None, 0.0),
    (npattn.SelfAttention_v2, True, None, 3, 2, 5, None, 0.0),
    (npattn.CausalAttention, False, None, 3, 2, 6, 6, 0.0),
    (npattn.CausalAttention, True, None, 3, 2, 4, 9, 0.0),
    (npattn.CausalAttention, True, None, 3, 2, 5, 8, 0.3),
    (npattn.MultiHeadAttentionWrapper, False, 2, 2, 2, 5, 5, 0.0),
    (npattn.MultiHeadAttentionWrapper, True, 3, 2, 1, 4, 8, 0.0),
    (npattn.MultiHeadAttentionWrapper, True, 2, 2, 2, 5, 6, 0.4),
    (npattn.MultiHeadAttention, False, 1, 4, 2, 5, 5, 0.0),
    (npattn.MultiHeadAttention, True, 2, 4, 2, 4, 9, 0.0),
    (npattn.MultiHeadAttention, False, 4, 8, 1, 6, 6, 0.0),
    (npattn.MultiHeadAttention, True, 3, 6, 2, 5, 7, 0.25),
]


@pytest.mark.parametrize("cls,qkv_bias,num_heads,d_out,batch,n,context_length,dropout", GRID)
def test_gradcheck(cls, qkv_bias, num_heads, d_out, batch, n, context_length, dropout):
    d_in = 3
    model = make(cls, d_in, d_out, context_length, dropout, num_heads, qkv_bias)
    x = np.random.default_rng(1).standard_normal((n, d_in) if batch is None else (batch, n, d_in))
    if dropout:
        fix_dropout(model, batch, n)
    else:
        model.eval()
    report = npattn.gradcheck(model, x)
    names = [c.name for c in report.checks]
    assert names == [name for name, _ in model.named_parameters()] + ["x"]
    assert any(name.endswith("bias") for name in names) == (qkv_bias or cls is npattn.MultiHeadAttention)
    for check in report.checks:
        if check.name == "W_key.bias":
            # The key bias adds q_i . b_key to every score in row i: softmax ignores such a shift, so
            # the true gradient is zero and the finite differences measure only their own noise.
            assert abs(check.analytical) < 1e-14 and abs(check.numerical) < 1e-9
            continue
        assert check.margin >= 100, f"{check.name}: margin {check.margin:.1f} < 100\n{report}"


def test_unfixed_dropout_makes_forward_random_and_gradcheck_refuse():
    model = make(npattn.CausalAttention, dropout=0.5)
    x = np.random.default_rng(1).standard_normal((2, 6, 4))
    assert not np.array_equal(model(x), model(x))
    with pytest.raises(npattn.errors.ConfigError, match="is random"):
        npattn.gradcheck(model, x, raise_exception=False)
    fix_dropout(model, 2, 6)
    np.testing.assert_array_equal(model(x), model(x))


def test_dropout_is_on_in_training_and_off_in_eval():
    x = np.random.default_rng(1).standard_normal((2, 6, 4))
    for cls in CAUSAL_CLASSES:
        with_dropout, without = make(cls, dropout=0.5), make(cls, dropout=0.0)
        assert not np.allclose(with_dropout(x), without(x))
        np.testing.assert_array_equal(with_dropout.eval()(x), without(x))
        # the masks come from the module's rng: the same seed, the same masks
        np.testing.assert_array_equal(make(cls, dropout=0.5)(x), make(cls, dropout=0.5)(x))


# ------------------------------------------------------------------ causality and masked positions


@pytest.mark.parametrize("cls", CAUSAL_CLASSES)
@pytest.mark.parametrize("qkv_bias", [False, True])
def test_outputs_do_not_depend_on_future_tokens(cls, qkv_bias):
    model = make(cls, qkv_bias=qkv_bias).eval()
    x = np.random.default_rng(1).standard_normal((2, 7, 4))
    out = model(x)
    for j in range(7):
        x_perturbed = x.copy()
        x_perturbed[:, j:] += np.random.default_rng(j).standard_normal(x_perturbed[:, j:].shape) * 10
        out_perturbed = model(x_perturbed)
        np.testing.assert_array_equal(out_perturbed[:, :j], out[:, :j])  # bit-identical
        assert not np.allclose(out_perturbed[:, j:], out[:, j:])


@pytest.mark.parametrize("cls", CAUSAL_CLASSES)
def test_masked_positions_get_exactly_zero_gradient(monkeypatch, cls):
    model = make(cls, context_length=9)
    x = np.random.default_rng(1).standard_normal((2, 6, 4))
    seen = []
    scores_backward = F.scores_backward

    def spy(d_attn_scores, cache):
        seen.append(d_attn_scores)
        return scores_backward(d_attn_scores, cache)

    plant(monkeypatch, "scores_backward", spy)
    out = model(x)
    model.backward(np.random.default_rng(2).standard_normal(out.shape))
    assert seen
    for d_attn_scores in seen:
        masked = np.triu(np.ones((6, 6), dtype=bool), 1)
        assert np.all(d_attn_scores[..., masked] == 0.0)
        # below the diagonal the gradient is not zero (row 0 has one weight, 1.0, whose softmax gradient is 0)
        assert np.all(d_attn_scores[..., np.tri(6, k=-1, dtype=bool)] != 0.0)
    # An upstream gradient on tokens 0..j-1 only reaches x[0..j-1]: exactly zero for later tokens.
    for j in range(1, 6):
        g = np.zeros(out.shape)
        g[:, :j] = np.random.default_rng(j).standard_normal(g[:, :j].shape)
        model(x)
        dx = model.backward(g)
        assert np.all(dx[:, j:] == 0.0) and np.all(dx[:, :j] != 0.0)


# ------------------------------------------------------------------ planted bugs


def _mask_backward_transposed(d_masked, cache):
    (mask,) = cache
    return (np.where(mask.T, 0.0, d_masked),)


def _mask_backward_zeroes_diagonal(d_masked, cache):
    (mask,) = cache
    return (np.where(mask | np.eye(*mask.shape, dtype=bool), 0.0, d_masked),)


def _dropout_backward_unscaled(d_out, cache):
    keep, _ = cache
    return (d_out * keep,)


def _dropout_backward_ignores_mask(d_out, cache):
    _, scale = cache
    return (d_out * scale,)


def _split_heads_backward_reshape_only(d_out, cache):
    (shape,) = cache
    return (d_out.reshape(shape),)


def _merge_heads_backward_reshape_only(d_out, cache):
    (shape,) = cache
    return (d_out.reshape(shape),)


_concat_backward = F.concat_backward


def _concat_backward_swapped(d_out, cache):
    return tuple(reversed(_concat_backward(d_out, cache)))


PLANTED = {  # name -> (functional attribute, broken backward, model class, dropout)
    "mask backward with the transposed mask": ("mask_backward", _mask_backward_transposed, "causal", 0.0),
    "mask backward also zeroes the diagonal": ("mask_backward", _mask_backward_zeroes_diagonal, "mha", 0.0),
    "dropout backward without 1/(1-p)": ("dropout_backward", _dropout_backward_unscaled, "causal", 0.3),
    "dropout backward ignores the keep mask": ("dropout_backward", _dropout_backward_ignores_mask, "mha", 0.3),
    "head split backward: reshape without transpose": (
        "split_heads_backward",
        _split_heads_backward_reshape_only,
        "mha",
        0.0,
    ),
    "head merge backward: reshape without transpose": (
        "merge_heads_backward",
        _merge_heads_backward_reshape_only,
        "mha",
        0.0,
    ),
    "concat backward with the heads swapped": ("concat_backward", _concat_backward_swapped, "wrapper", 0.0),
}
MODELS = {
    "causal": npattn.CausalAttention,
    "mha": npattn.MultiHeadAttention,
    "wrapper": npattn.MultiHeadAttentionWrapper,
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_gradcheck_rejects_planted_bug(monkeypatch, bug):
    attr, broken, model_name, dropout = PLANTED[bug]
    model = make(MODELS[model_name], d_in=3, d_out=4, context_length=6, dropout=dropout, num_heads=2)
    x = np.random.default_rng(1).standard_normal((2, 5, 3))
    fix_dropout(model, 2, 5) if dropout else model.eval()
    assert npattn.gradcheck(model, x)  # the same problem passes without the bug
    plant(monkeypatch, attr, broken)
    with pytest.raises(npattn.GradcheckError, match=r"numerical .* analytical"):
        npattn.gradcheck(model, x)


# ------------------------------------------------------------------ state dicts


@pytest.mark.parametrize(
    "model,keys",
    [
        (npattn.SelfAttention_v2(3, 2, rng=0), ["W_query.weight", "W_key.weight", "W_value.weight"]),
        (
            npattn.SelfAttention_v2(3, 2, qkv_bias=True, rng=0),
            ["W_query.weight", "W_query.bias", "W_key.weight", "W_key.bias", "W_value.weight", "W_value.bias"],
        ),
        (npattn.CausalAttention(3, 2, 6, 0.0, rng=0), ["mask", "W_query.weight", "W_key.weight", "W_value.weight"]),
        (
            npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, rng=0),
            [f"heads.{i}.{k}" for i in (0, 1) for k in ("mask", "W_query.weight", "W_key.weight", "W_value.weight")],
        ),
        (
            npattn.MultiHeadAttention(3, 2, 6, 0.0, 2, qkv_bias=True, rng=0),
            ["mask"]
            + [f"{w}.{k}" for w in ("W_query", "W_key", "W_value") for k in ("weight", "bias")]
            + ["out_proj.weight", "out_proj.bias"],
        ),
    ],
)
def test_state_dict_keys_match_pytorch(model, keys):
    state = model.state_dict()
    assert list(state) == keys
    for key, value in state.items():
        if key.endswith("mask"):
            assert value.dtype == bool and value.shape == (6, 6)
            np.testing.assert_array_equal(value, np.triu(np.ones((6, 6)), 1).astype(bool))
        elif key.endswith("weight"):
            assert value.shape in [(2, 3), (2, 2)]


def test_book_float_mask_loads_and_other_values_are_rejected():
    model = npattn.CausalAttention(3, 2, 6, 0.0, rng=123)
    state = model.state_dict()
    state["mask"] = np.triu(np.ones((6, 6), dtype=np.float32), 1)  # the book's register_buffer value
    other = npattn.CausalAttention(3, 2, 6, 0.0, rng=5)
    other.load_state_dict(state, strict=True)
    assert other.mask.dtype == bool
    np.testing.assert_array_equal(other(npattn.book_batch()), model(npattn.book_batch()))
    before = other.state_dict()
    state["mask"] = state["mask"] * 0.5
    state["W_query.weight"] = state["W_query.weight"] + 1
    with pytest.raises(npattn.StateDictError, match=r"non-boolean values in mask: expected True/False or 0/1.*0\.5"):
        other.load_state_dict(state)
    for key, value in other.state_dict().items():
        np.testing.assert_array_equal(value, before[key])  # nothing copied


def test_state_dict_round_trip_between_npattn_models():
    x = npattn.book_batch()
    for cls in ALL_CLASSES:
        a, b = make(cls, d_in=3, seed=1).eval(), make(cls, d_in=3, seed=2).eval()
        b.load_state_dict(a.state_dict(), strict=True)
        np.testing.assert_array_equal(a(x), b(x))


def test_to_float64_keeps_the_bool_mask():
    model = npattn.MultiHeadAttention(3, 2, 6, 0.0, 2, rng=123).to(np.float64)
    assert model.mask.dtype == bool and model.out_proj.weight.dtype == np.float64
    np.testing.assert_allclose(model(npattn.book_batch())[0, 0], [0.3190, 0.4858], atol=ATOL)


# ------------------------------------------------------------------ shapes, traces, errors


@pytest.mark.parametrize("cls", CAUSAL_CLASSES)
def test_shorter_sequences_and_empty_ones(cls):
    model = make(cls, context_length=7)
    width = 8 if cls is npattn.MultiHeadAttentionWrapper else 4
    for n in (0, 1, 3, 7):
        out = model(np.ones((2, n, 4)))
        assert out.shape == (2, n, width)
        assert model.backward(np.ones_like(out)).shape == (2, n, 4)


def test_n_shorter_than_context_length_uses_the_top_left_of_the_mask():
    model = npattn.CausalAttention(3, 2, 50, 0.0, rng=123)
    np.testing.assert_allclose(model(npattn.book_batch())[0], CAUSAL_OUT, atol=ATOL)


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_trace_records_every_stage(cls):
    model = make(cls, dropout=0.2)
    stages = []
    model._recorder = lambda name, arr: stages.append((name, arr.shape))
    model(np.ones((2, 5, 4)))
    names = [name for name, _ in stages]
    core = ["x", "queries", "keys", "values", "attn_scores"]
    if cls is npattn.SelfAttention_v2:
        assert names == [*core, "attn_weights", "context_vec"]
    elif cls is npattn.CausalAttention:
        assert names == [*core, "masked_scores", "attn_weights", "dropped_weights", "context_vec"]
    elif cls is npattn.MultiHeadAttention:
        causal = ["masked_scores", "attn_weights", "dropped_weights", "context_vec"]
        assert names == [*core, *causal, "merged_heads", "out_proj"]
        assert dict(stages)["attn_weights"] == (2, 2, 5, 5)
    else:
        per_head = [*core, "masked_scores", "attn_weights", "dropped_weights", "context_vec"]
        assert names == [f"heads.{i}.{s}" for i in (0, 1) for s in per_head] + ["context_vec"]
        assert all(head._recorder is None for head in model.heads)


def test_repr_and_structure():
    wrapper = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, rng=0)
    assert isinstance(wrapper.heads, npattn.ModuleList) and len(wrapper.heads) == 2
    assert all(isinstance(h, npattn.CausalAttention) for h in wrapper.heads)
    assert repr(wrapper).startswith(
        "MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0, qkv_bias=False, num_heads=2"
    )
    mha = npattn.MultiHeadAttention(3, 4, 6, 0.1, 2, rng=0)
    assert mha.head_dim == 2 and mha.out_proj.bias is not None
    assert "(dropout): Dropout(p=0.1)" in repr(mha)


@pytest.mark.parametrize("cls", CAUSAL_CLASSES)
def test_input_errors(cls):
    model = make(cls, context_length=6)
    with pytest.raises(npattn.ShapeError, match="n=7 exceeds context_length=6"):
        model(np.zeros((1, 7, 4)))
    with pytest.raises(npattn.ShapeError, match=r"expected a batch of shape \(batch, n, d_in=4\), got shape \(5, 4\)"):
        model(np.zeros((5, 4)))
    with pytest.raises(npattn.ShapeError, match="d_in=4"):
        model(np.zeros((1, 5, 3)))
    with pytest.raises(npattn.BackwardError):
        make(cls).backward(np.zeros((1, 5, 4)))
    out = model(np.zeros((1, 5, 4)))
    with pytest.raises(npattn.ShapeError, match="expected shape"):
        model.backward(np.zeros((1, 4, out.shape[-1])))


def test_d_out_must_divide_num_heads():
    with pytest.raises(npattn.ConfigError, match="d_out must be divisible by num_heads, got d_out=5 and num_heads=2"):
        npattn.MultiHeadAttention(3, 5, 6, 0.0, 2)
    npattn.MultiHeadAttentionWrapper(3, 5, 6, 0.0, 2)  # the wrapper has no such constraint


BAD_ARGS = [  # (d_in, d_out, context_length, dropout, qkv_bias): each has one bad value
    (0, 2, 6, 0.0, False),
    (3, -2, 6, 0.0, False),
    (3, 2, 0, 0.0, False),
    (3, 2, 6.0, 0.0, False),
    (3, 2, 6, 1.0, False),
    (3, 2, 6, -0.1, False),
    (3, 2, 6, 0.0, "yes"),
]


@pytest.mark.parametrize("args", BAD_ARGS)
def test_constructor_errors(args):
    d_in, d_out, context_length, dropout, qkv_bias = args
    with pytest.raises(npattn.ConfigError):
        npattn.CausalAttention(*args)
    for cls in (npattn.MultiHeadAttentionWrapper, npattn.MultiHeadAttention):
        with pytest.raises(npattn.ConfigError):
            cls(d_in, d_out, context_length, dropout, 2, qkv_bias)
    if (
        type(context_length) is int and context_length == 6 and dropout == 0.0
    ):  # the bad value is in d_in, d_out or qkv_bias
        with pytest.raises(npattn.ConfigError):
            npattn.SelfAttention_v2(d_in, d_out, qkv_bias)


@pytest.mark.parametrize("num_heads", [0, -1, 2.0, "2", True])
def test_num_heads_errors(num_heads):
    for cls in (npattn.MultiHeadAttentionWrapper, npattn.MultiHeadAttention):
        with pytest.raises(npattn.ConfigError, match="num_heads"):
            cls(3, 4, 6, 0.0, num_heads)
