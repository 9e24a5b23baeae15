"""trace, predict_shapes, check_shapes, check_rows and compare on the chapter-3 classes."""

import numpy as np
import pytest
from planted import plant

import npattn
from npattn.cli.main import main
from npattn.debug.compare import compare
from npattn.debug.formulas import kind_of
from npattn.debug.predict import check_shapes, predict_shapes, predict_shapes_for
from npattn.debug.rows import check_rows, check_rows_of
from npattn.debug.trace import trace
from npattn.errors import ConfigError

CORE = ["x", "queries", "keys", "values", "attn_scores"]
CAUSAL = [*CORE, "masked_scores", "attn_weights", "context_vec"]

# the book's outputs, first sequence of the batch, last row (step)
V2_STEP = [-0.0754, 0.0693]  # SelfAttention_v2(3, 2), seed 789
CAUSAL_STEP = [-0.5299, -0.1081]  # CausalAttention(3, 2, 6, 0.0), seed 123
WRAPPER_STEP = [-0.5299, -0.1081, 0.5077, 0.3493]  # MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2), seed 123
MHA_STEP = [0.2575, 0.4028]  # MultiHeadAttention(3, 2, 6, 0.0, 2), seed 123


def _shapes(recorded):
    return {s.qualname: s.shape for s in recorded}


def _assert_matches_prediction(model, x, recorded):
    prediction = predict_shapes_for(model, x)
    assert [s.name for s in prediction.stages] == [s.qualname for s in recorded]
    check = check_shapes(prediction, recorded)
    assert check and check.first_mismatch is None, str(check)
    return prediction


# ---------------------------------------------------------------------------------------------- SelfAttention_v2


@pytest.mark.parametrize("batched", [False, True])
def test_trace_of_self_attention_v2(batched):
    model = npattn.SelfAttention_v2(3, 2, rng=789)
    x = npattn.book_batch() if batched else npattn.book_inputs()
    lead = (2,) if batched else ()
    recorded = trace(model, x)
    assert [s.name for s in recorded] == [*CORE, "attn_weights", "context_vec"]
    assert _shapes(recorded) == {
        "x": (*lead, 6, 3),
        "queries": (*lead, 6, 2),
        "keys": (*lead, 6, 2),
        "values": (*lead, 6, 2),
        "attn_scores": (*lead, 6, 6),
        "attn_weights": (*lead, 6, 6),
        "context_vec": (*lead, 6, 2),
    }
    # the Linear's weight is (d_out, d_in): the formula multiplies by its transpose, (d_in, d_out)
    assert recorded.stage("queries").input_shapes == (("x", (*lead, 6, 3)), ("W_query", (3, 2)))
    np.testing.assert_allclose(recorded["queries"], x @ model.W_query.weight.data.T, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(recorded.output)[..., 5, :], np.broadcast_to(V2_STEP, (*lead, 2)), atol=1e-4)
    assert _assert_matches_prediction(model, x, recorded).kind == "self"
    assert check_rows_of(model, x, recorded)


# ---------------------------------------------------------------------------------------------- CausalAttention


def test_trace_of_causal_attention_records_the_masked_scores():
    model = npattn.CausalAttention(3, 2, 6, 0.0, rng=123)
    x = npattn.book_batch()
    recorded = trace(model, x)
    assert [s.name for s in recorded] == CAUSAL
    assert _shapes(recorded)["masked_scores"] == (2, 6, 6)
    masked = recorded["masked_scores"]
    above = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert np.all(np.isneginf(masked[:, above])) and np.all(np.isfinite(masked[:, ~above]))
    assert recorded.stage("attn_weights").input_shapes == (("masked_scores", (2, 6, 6)),)
    np.testing.assert_array_equal(recorded["attn_weights"][:, above], 0.0)
    np.testing.assert_allclose(recorded.output[0, 5], CAUSAL_STEP, atol=1e-4)
    _assert_matches_prediction(model, x, recorded)
    assert check_rows_of(model, x, recorded, tokens=npattn.BOOK_TOKENS)


def test_trace_of_causal_attention_with_dropout_in_training_mode():
    model = npattn.CausalAttention(3, 2, 6, 0.5, rng=123)
    x = npattn.book_batch()
    recorded = trace(model, x)
    names = [s.name for s in recorded]
    assert names == [*CAUSAL[:-1], "dropped_weights", "context_vec"]
    dropped, weights = recorded["dropped_weights"], recorded["attn_weights"]
    assert dropped.shape == (2, 6, 6)
    assert np.all((dropped == 0) | np.isclose(dropped, 2 * weights))  # dropped, or kept and scaled by 1/(1 - p)
    assert np.any((dropped == 0) & (weights > 0))
    assert recorded.stage("context_vec").input_shapes == (("dropped_weights", (2, 6, 6)), ("values", (2, 6, 2)))
    prediction = _assert_matches_prediction(model, x, recorded)
    assert "dropped_weights" in prediction
    # eval mode: no dropout stage, in the trace and in the prediction
    model.eval()
    recorded = trace(model, x)
    assert "dropped_weights" not in recorded
    assert "dropped_weights" not in _assert_matches_prediction(model, x, recorded)


# ---------------------------------------------------------------------------------------------- the wrapper


def test_trace_of_the_wrapper_records_every_head():
    model = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=123)
    x = npattn.book_batch()
    recorded = trace(model, x)
    assert [s.qualname for s in recorded] == [f"heads.{i}.{s}" for i in (0, 1) for s in CAUSAL] + ["context_vec"]
    head1_queries = recorded.stage("heads.1.queries")
    assert (head1_queries.module, head1_queries.name) == ("heads.1", "queries")
    assert head1_queries.formula == "x @ W_query"
    assert head1_queries.input_shapes == (("x", (2, 6, 3)), ("W_query", (3, 2)))
    np.testing.assert_allclose(head1_queries.array, x @ model.heads[1].W_query.weight.data.T, rtol=1e-6)
    out = recorded.stage("context_vec")
    assert out.module == "" and out.shape == (2, 6, 4) and out.formula.startswith("concat(")
    assert out.input_shapes == (("heads.0.context_vec", (2, 6, 2)), ("heads.1.context_vec", (2, 6, 2)))
    np.testing.assert_array_equal(
        recorded.output, np.concatenate([recorded["heads.0.context_vec"], recorded["heads.1.context_vec"]], -1)
    )
    np.testing.assert_allclose(recorded.output[0, 5], WRAPPER_STEP, atol=1e-4)
    assert model._recorder is None and all(head._recorder is None for head in model.heads)
    prediction = _assert_matches_prediction(model, x, recorded)
    assert prediction.output_shape == (2, 6, 4) and prediction.num_heads == 2
    assert check_rows_of(model, x, recorded)


def test_check_shapes_on_the_wrappers_output():
    model = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=123)
    x = npattn.book_batch()
    prediction = predict_shapes(6, 3, 2, batch=2, num_heads=2, kind="wrapper")
    assert check_shapes(prediction, model(x))  # (b, n, d_out * num_heads) is right
    one_head = check_shapes(prediction, model(x)[..., :2])
    assert not one_head and "one head's: concatenate the 2 heads' outputs" in str(one_head)
    # a single-head prediction does not fit the wrapper's output
    single = check_shapes(predict_shapes(6, 3, 2, batch=2, kind="causal"), trace(model, x))
    assert not single and single.first_mismatch == "context_vec"


# ---------------------------------------------------------------------------------------------- MultiHeadAttention


def test_trace_of_multi_head_attention_per_head_shapes():
    model = npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)  # head_dim 2
    x = npattn.book_batch()
    recorded = trace(model, x)
    assert _shapes(recorded) == {
        "x": (2, 6, 3),
        "queries": (2, 6, 4),
        "keys": (2, 6, 4),
        "values": (2, 6, 4),
        "attn_scores": (2, 2, 6, 6),
        "masked_scores": (2, 2, 6, 6),
        "attn_weights": (2, 2, 6, 6),
        "context_vec": (2, 2, 6, 2),
        "merged_heads": (2, 6, 4),
        "out_proj": (2, 6, 4),
    }
    split_queries = recorded["queries"].reshape(2, 6, 2, 2).transpose(0, 2, 1, 3)
    split_keys = recorded["keys"].reshape(2, 6, 2, 2).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(recorded["attn_scores"], split_queries @ split_keys.swapaxes(-1, -2), rtol=1e-5)
    merged = recorded["context_vec"].transpose(0, 2, 1, 3).reshape(2, 6, 4)
    np.testing.assert_array_equal(recorded["merged_heads"], merged)
    np.testing.assert_array_equal(recorded["out_proj"], recorded.output)
    assert recorded.stage("attn_weights").formula == "softmax(attn_scores / sqrt(head_dim)) over keys"
    assert recorded.stage("merged_heads").input_shapes == (("context_vec", (2, 2, 6, 2)),)
    assert recorded.stage("out_proj").input_shapes == (("merged_heads", (2, 6, 4)), ("out_proj", (4, 4)))
    prediction = _assert_matches_prediction(model, x, recorded)
    assert prediction.output_name == "out_proj" and prediction.kind == "multihead"
    assert check_rows_of(model, x, recorded)  # each head's rows computed on their own, on merged_heads


def test_trace_of_the_books_multi_head_attention():
    model = npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, rng=123)  # head_dim 1
    recorded = trace(model, npattn.book_batch())
    assert recorded.shapes["context_vec"] == (2, 2, 6, 1) and recorded.shapes["out_proj"] == (2, 6, 2)
    np.testing.assert_allclose(recorded.output[0, 5], MHA_STEP, atol=1e-4)


def test_check_shapes_of_a_multi_head_output():
    prediction = predict_shapes(6, 3, 4, batch=2, num_heads=2)
    assert prediction.kind == "multihead" and prediction.output_shape == (2, 6, 4)
    assert check_shapes(prediction, np.zeros((2, 6, 4)))
    unmerged = check_shapes(prediction, np.zeros((2, 2, 6, 2)))
    assert not unmerged and "the heads were not merged back" in str(unmerged)
    wrong_heads = check_shapes(prediction, {"context_vec": np.zeros((2, 6, 2, 2))})
    assert wrong_heads.first_mismatch == "context_vec"


# ---------------------------------------------------------------------------------------------- predict_shapes


def test_predict_shapes_kinds_and_errors():
    assert [s.name for s in predict_shapes(6, 3, 2).stages] == [*CORE, "attn_weights", "context_vec"]
    causal = predict_shapes(6, 3, 2, kind="causal", dropout=True)
    assert [s.name for s in causal.stages] == [*CAUSAL[:-1], "dropped_weights", "context_vec"]
    wrapper = predict_shapes(6, 3, 2, batch=2, num_heads=3, kind="wrapper")
    assert len(wrapper.stages) == 3 * len(CAUSAL) + 1 and wrapper["heads.2.attn_weights"] == (2, 6, 6)
    assert wrapper.stages[1].formula == "x @ W_query" and "d_out * num_heads = 6" in wrapper.output_columns
    assert "num_heads=3" in str(wrapper)
    for kwargs, message in [
        ({"kind": "wrapper"}, "num_heads is required"),
        ({"kind": "causal", "num_heads": 2}, "num_heads is not used"),
        ({"kind": "cross"}, "kind must be one of"),
        ({"dropout": True}, "no dropout stage"),
        ({"num_heads": 4}, "divisible by num_heads"),
        ({"num_heads": 0}, "num_heads"),
    ]:
        with pytest.raises(ConfigError, match=message):
            predict_shapes(6, 3, 2, **kwargs)
    with pytest.raises(ConfigError, match="use predict_shapes"):
        predict_shapes_for(npattn.Linear(3, 2), np.zeros((6, 3)))
    assert kind_of(npattn.Linear(3, 2)) is None and kind_of(npattn.SelfAttention_v1(3, 2)) == "self"


# ---------------------------------------------------------------------------------------------- compare, planted bugs


def _without_mask(module):
    """Planted bug: the causal mask buffer masks nothing (every token sees the whole sequence)."""
    module.mask[...] = False
    return module


def _merge_without_transpose(context_vec):
    """Planted bug: (b, h, n, head_dim) reshaped straight to (b, n, d_out), the transpose forgotten."""
    b, h, n, head_dim = context_vec.shape
    return context_vec.reshape(b, n, h * head_dim), (context_vec.shape,)


def _mha():
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)


def test_compare_multi_head_attention_with_itself():
    x = npattn.book_batch()
    result = compare(_mha(), _mha(), x)
    assert result and result.first_divergence is None
    assert [s.name for s in result.stages][-2:] == ["merged_heads", "out_proj"]


def test_compare_finds_a_planted_mask_bug_in_multi_head_attention():
    x = npattn.book_batch()
    broken = _without_mask(npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123))
    result = compare(_mha(), broken, x)
    assert result.first_divergence == "masked_scores"
    assert all(result[s].max_diff == 0.0 for s in CORE)
    assert "check which entries are set to -inf" in str(result)


def test_compare_finds_a_planted_merge_bug_in_multi_head_attention(monkeypatch):
    x = npattn.book_batch()
    reference = trace(_mha(), x)
    plant(monkeypatch, "merge_heads_forward", _merge_without_transpose)
    broken = trace(_mha(), x)
    result = compare(reference, broken, x)
    assert result.first_divergence == "merged_heads"
    assert result["context_vec"].max_diff == 0.0 and result["out_proj"].diverged
    assert "transpose(1, 2)" in str(result)
    assert not check_rows_of(_mha(), x, broken)  # the single-token check sees it too


def test_compare_names_the_head_of_a_wrapper_that_diverges():
    x = npattn.book_batch()
    reference = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=123)
    broken = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=123)
    _without_mask(broken.heads[1])
    result = compare(reference, broken, x)
    assert result.first_divergence == "heads.1.masked_scores"
    assert result["heads.0.context_vec"].max_diff == 0.0
    assert "first diverging stage: heads.1.masked_scores: the causal mask differs" in str(result)


def test_check_rows_per_head_rejects_a_bad_split():
    model = _mha()
    x = npattn.book_batch()
    merged = trace(model, x)["merged_heads"]
    assert check_rows(x, model, merged, causal=True, num_heads=2)
    plain = dict(npattn.weights_of(model))  # the weights alone: nothing says how many heads they hold
    assert not check_rows(x, plain, merged, causal=True, num_heads=1)  # one head of 4 columns is different
    with pytest.raises(ConfigError, match=r"with num_heads=2, checked with num_heads=1; pass num_heads=2"):
        check_rows(x, model, merged, causal=True, num_heads=1)  # the module says how many
    with pytest.raises(ConfigError, match="does not divide"):
        check_rows(x, model, merged, num_heads=3)


# ---------------------------------------------------------------------------------------------- npattn trace --class


@pytest.mark.parametrize(
    "name, header, step",
    [
        ("v1", "SelfAttention_v1(d_in=3, d_out=2, rng=123)", "step    [ 0.2990,  0.8040]"),
        ("v2", "SelfAttention_v2(d_in=3, d_out=2, qkv_bias=False, rng=789)", "step    [-0.0754,  0.0693]"),
        ("causal", "CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0", "step    [-0.5299, -0.1081]"),
        ("wrapper", "num_heads=2, rng=123)", "step    [-0.5299, -0.1081,  0.5077,  0.3493]"),
        ("mha", "MultiHeadAttention(d_in=3, d_out=2, context_length=6", "step    [ 0.2575,  0.4028]"),
    ],
)
def test_cli_trace_book_class(capsys, name, header, step):
    assert main(["trace", "--book", "--class", name]) == 0
    out = capsys.readouterr().out
    assert header in out and "on the book's input batch (2, 6, 3)" in out
    assert "shape check: all" in out and "single-token check" in out and "PASSED" in out
    assert step in out


def test_cli_trace_class_with_sizes(capsys):
    assert main(["trace", "--class", "mha", "--tokens", "5", "--d-in", "4", "--d-out", "6", "--heads", "3"]) == 0
    out = capsys.readouterr().out
    assert "on 5 random tokens (2, 5, 4)" in out and "(2, 3, 5, 2)" in out and "merged_heads" in out
    assert main(["trace", "--class", "mha", "--d-out", "3"]) == 2
    assert "d_out must be divisible by num_heads" in capsys.readouterr().err
