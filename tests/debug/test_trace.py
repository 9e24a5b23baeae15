import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.debug.compare import compare
from npattn.debug.predict import check_shapes, predict_shapes
from npattn.debug.rows import check_rows, single_token_context
from npattn.debug.trace import trace
from npattn.debug.weights import weights_of
from npattn.errors import ConfigError, ShapeError
from npattn.nn import functional as F

BOOK_SHAPES = {
    "x": (6, 3),
    "queries": (6, 2),
    "keys": (6, 2),
    "values": (6, 2),
    "attn_scores": (6, 6),
    "attn_weights": (6, 6),
    "context_vec": (6, 2),
}


# ---------------------------------------------------------------------------------------------- predict_shapes


def test_predict_shapes_for_the_seed_example():
    prediction = predict_shapes(6, 3, 2)
    assert {s.name: s.shape for s in prediction.stages} == BOOK_SHAPES
    assert prediction.output_shape == (6, 2)
    assert "d_in=3 -> d_out=2" in dict((s.name, s.change) for s in prediction.stages)["queries"]
    text = str(prediction)
    assert "attn_weights" in text and "(6, 6)" in text and "each row now sums to 1" in text


def test_predict_shapes_with_a_batch():
    prediction = predict_shapes(6, 3, 2, batch=2)
    assert {s.name: s.shape for s in prediction.stages} == {k: (2, *v) for k, v in BOOK_SHAPES.items()}


@pytest.mark.parametrize("args", [(-1, 3, 2), (6, 0, 2), (6, 3, -1), (6, 3, 2.5)])
def test_predict_shapes_rejects_bad_sizes(args):
    with pytest.raises(ConfigError):
        predict_shapes(*args)


# ---------------------------------------------------------------------------------------------- trace


def test_trace_of_the_book_example_records_every_stage():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    recorded = trace(model, x)
    assert [s.name for s in recorded] == list(BOOK_SHAPES)
    assert recorded.shapes == BOOK_SHAPES
    np.testing.assert_array_equal(recorded["context_vec"], recorded.output)
    np.testing.assert_array_equal(recorded["queries"], x @ model.W_query.data)
    np.testing.assert_allclose(recorded["context_vec"][1], [0.3061, 0.8210], atol=1e-4)  # the book's row 2
    queries = recorded.stage("queries")
    assert queries.formula == "x @ W_query"
    assert queries.input_shapes == (("x", (6, 3)), ("W_query", (3, 2)))
    assert recorded.stage("context_vec").input_shapes == (("attn_weights", (6, 6)), ("values", (6, 2)))
    text = str(recorded)
    assert "queries @ keys^T" in text and "attn_weights (6, 6), values (6, 2)" in text
    assert check_shapes(predict_shapes(6, 3, 2), recorded)


def test_trace_of_a_batch_matches_the_batched_prediction():
    recorded = trace(npattn.SelfAttention_v1(3, 2, rng=123), npattn.book_batch())
    assert recorded.shapes == {k: (2, *v) for k, v in BOOK_SHAPES.items()}
    check = check_shapes(predict_shapes(6, 3, 2, batch=2), recorded)
    assert check and check.first_mismatch is None
    assert not check_shapes(predict_shapes(6, 3, 2), recorded)  # an unbatched prediction does not fit


class _Rescaled(npattn.Module):
    """A hand-written module: an attention child, then a stage of its own with a name trace does not know."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = npattn.SelfAttention_v1(3, 2, rng=1)

    def forward(self, x):
        out = self.inner(x)
        record = self._record()
        if record:
            record("doubled", 2 * out)
        return 2 * out


def test_trace_is_generic_over_modules_and_stage_names():
    model = _Rescaled()
    recorded = trace(model, npattn.book_inputs())
    assert [s.qualname for s in recorded][:2] == ["inner.x", "inner.queries"]
    doubled = recorded.stage("doubled")
    assert doubled.module == "" and doubled.formula == "" and doubled.shape == (6, 2)
    assert doubled.input_shapes == ()  # the first stage of its own module: nothing earlier to point to
    assert recorded["inner.context_vec"].shape == (6, 2)
    assert "doubled" in str(recorded)
    assert check_shapes(predict_shapes(6, 3, 2), recorded)  # plain names are found in the sub-module


class _Fails(npattn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = npattn.SelfAttention_v1(3, 2, rng=1)

    def forward(self, x):
        self.inner(x)
        raise RuntimeError("boom")


def test_trace_restores_previous_recorders_even_on_error():
    def sentinel(name, array):
        pass

    model = _Fails()
    model.inner._recorder = sentinel
    with pytest.raises(RuntimeError, match="boom"):
        trace(model, npattn.book_inputs())
    assert model._recorder is None and model.inner._recorder is sentinel
    ok = npattn.SelfAttention_v1(3, 2, rng=1)
    trace(ok, npattn.book_inputs())
    assert ok._recorder is None


def test_trace_rejects_a_non_module():
    with pytest.raises(ConfigError, match=r"expects an npattn\.Module"):
        trace(lambda x: x, npattn.book_inputs())


# ---------------------------------------------------------------------------------------------- check_shapes


@pytest.mark.parametrize(
    "shape, advice",
    [
        ((6, 3), "a projection used d_in where d_out was expected"),
        ((6, 4), "look at the context stage first"),
        ((3, 2), "one row per token"),
        ((2, 6, 2), "batch dimension"),
    ],
)
def test_check_shapes_gives_the_seeds_advice_for_a_wrong_output(shape, advice):
    check = check_shapes(predict_shapes(6, 3, 2), np.zeros(shape))
    assert not check
    assert check.first_mismatch == "context_vec"
    assert any(advice in a for a in check.advice)
    assert "FAILED" in str(check) and advice in str(check)


def test_check_shapes_names_the_first_wrong_stage():
    actual = {"x": (6, 3), "queries": (6, 3), "keys": (6, 2), "attn_scores": (6, 2), "context_vec": np.zeros((6, 3))}
    check = check_shapes(predict_shapes(6, 3, 2), actual)
    assert check.first_mismatch == "queries"
    assert "queries has d_in=3 columns" in check.advice[0]
    assert "a projection used d_in" in check.advice[1]


def test_check_shapes_with_nothing_recorded_fails():
    assert not check_shapes(predict_shapes(6, 3, 2), {})


# ---------------------------------------------------------------------------------------------- check_rows


def test_check_rows_on_the_book_example():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    check = check_rows(x, model, model(x), tokens=npattn.BOOK_TOKENS)
    assert check and check.max_diff < 1e-6
    np.testing.assert_allclose(check.expected[1], [0.3061, 0.8210], atol=1e-4)  # the book's context_vec_2
    assert "PASSED" in str(check)


def test_check_rows_reports_the_worst_row():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    out = model(x).copy()
    out[3, 1] += 0.01
    check = check_rows(x, model, out, tokens=npattn.BOOK_TOKENS)
    assert not check
    assert check.worst_row == (3,) and check.bad_rows == [(3,)]
    assert check.max_diff == pytest.approx(0.01, rel=1e-3)
    assert "row 4 (with)" in str(check) and "FAILED (1 of 6 rows differ)" in str(check)


def test_check_rows_on_a_batch():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_batch()
    out = model(x).copy()
    assert check_rows(x, model, out)
    out[1, 5, 0] -= 0.5
    check = check_rows(x, model, out)
    assert check.worst_row == (1, 5) and "batch 1, row 6" in str(check)


def test_check_rows_causal_agrees_with_the_masked_batched_computation(rng):
    x = rng.standard_normal((5, 4))
    W = {n: rng.standard_normal((4, 3)) for n in ("W_query", "W_key", "W_value")}
    q, k, v = (x @ W[n] for n in ("W_query", "W_key", "W_value"))
    masked, _ = F.mask_forward(q @ k.T, F.causal_mask(5))
    batched = F.softmax(masked / np.sqrt(3)) @ v
    assert check_rows(x, W, batched, causal=True)
    assert not check_rows(x, W, batched)  # the non-causal single-token computation differs
    np.testing.assert_allclose(single_token_context(x, *W.values(), 0, causal=True), v[0])


def test_check_rows_rejects_an_output_of_the_wrong_shape():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    with pytest.raises(ShapeError, match=r"expected shape \(6, 2\)"):
        check_rows(npattn.book_inputs(), model, np.zeros((6, 3)))


# ---------------------------------------------------------------------------------------------- compare


def _stages(x, W_query, W_key, W_value, *, scale=None, value_bug=False):
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    if value_bug:
        values = values + 0.1
    attn_scores = queries @ keys.T
    attn_weights = F.softmax(attn_scores * (scale if scale is not None else 1 / np.sqrt(keys.shape[-1])))
    arrays = (queries, keys, values, attn_scores, attn_weights, attn_weights @ values)
    return dict(zip(["queries", "keys", "values", "attn_scores", "attn_weights", "context_vec"], arrays))


def test_compare_a_module_with_itself_and_with_a_correct_function():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    assert compare(model, npattn.SelfAttention_v1(3, 2, rng=123), x).first_divergence is None
    result = compare(model, _stages, x, weights=model)
    assert result and result.first_divergence is None
    assert result["attn_weights"].max_diff < 1e-6


@pytest.mark.parametrize(
    "kwargs, first, hint",
    [({"scale": 1.0}, "attn_weights", "check the scale"), ({"value_bug": True}, "values", "leaves the weights alone")],
)
def test_compare_finds_the_first_diverging_stage(kwargs, first, hint):
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    result = compare(model, lambda *a: _stages(*a, **kwargs), npattn.book_inputs(), weights=model)
    assert not result
    assert result.first_divergence == first
    assert result["context_vec"].diverged
    assert f"first diverging stage: {first}" in str(result) and hint in str(result)


def test_compare_with_only_an_output_says_what_was_not_compared():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    result = compare(model, lambda x: model(x) + 1, x)
    assert result.first_divergence == "context_vec"
    assert "were not compared" in str(result)
    assert "only in reference" in str(result)


def test_compare_reports_a_shape_difference_and_equal_masked_entries():
    ref = {"masked_scores": np.array([[1.0, -np.inf], [2.0, 3.0]]), "context_vec": np.zeros((2, 2))}
    cand = {"masked_scores": ref["masked_scores"].copy(), "context_vec": np.zeros((2, 3))}
    result = compare(lambda x: ref, lambda x: cand, None)
    assert not result["masked_scores"].diverged and result["masked_scores"].max_diff == 0.0
    assert result.first_divergence == "context_vec"
    assert "SHAPE (2, 2) vs (2, 3)" in str(result)


# ---------------------------------------------------------------------------------------------- weights_of


def test_weights_of_modules_mappings_and_linear_state_dicts():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    W = weights_of(model)
    np.testing.assert_array_equal(W["W_key"], model.W_key.data)
    assert weights_of(model.state_dict())["W_value"].shape == (3, 2)
    linear_state = {f"{n}.weight": w.T for n, w in W.items()}  # nn.Linear keeps (d_out, d_in)
    np.testing.assert_array_equal(weights_of(linear_state)["W_query"], W["W_query"])
    with pytest.raises(ConfigError, match="no W_key"):
        weights_of({"W_query": W["W_query"], "W_value": W["W_value"]})


# ---------------------------------------------------------------------------------------------- npattn trace


def test_cli_trace_book(capsys):
    assert main(["trace", "--book"]) == 0
    out = capsys.readouterr().out
    for text in [
        "x @ W_query",
        "x (6, 3), W_query (3, 2)",
        "all 7 recorded stages match the prediction",
        "single-token check",
        "PASSED",
        "row 2 (journey) computed on its own: [0.3061, 0.8210]",
        "journey [ 0.3061,  0.8210]",
    ]:
        assert text in out


def test_cli_trace_sizes_and_values(capsys):
    assert main(["trace", "--tokens", "4", "--d-in", "5", "--d-out", "3", "--values"]) == 0
    out = capsys.readouterr().out
    assert "x (4, 5), W_query (5, 3)" in out and "attn_scores (4, 4):" in out


def test_cli_trace_bad_size(capsys):
    assert main(["trace", "--tokens", "0"]) == 2
    assert "argument --tokens: must be a positive integer, got 0" in capsys.readouterr().err
