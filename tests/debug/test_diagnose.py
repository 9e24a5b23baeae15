"""diagnose: each catalogued mistake planted in a small user implementation must be named, alone.

The user implementations below are plain NumPy written independently of npattn (as a learner
would), one mistake each. Shapes n=5, d_in=4, d_out=3 with normal weights keep every mistake
distinguishable from the others and from the correct answer (asserted below).
"""

import itertools

import numpy as np
import pytest

import npattn
from npattn.debug.diagnose import CATALOGUE, attention_variant, diagnose
from npattn.errors import ConfigError, ShapeError
from npattn.random import TorchGenerator, linear_init_bounds, uniform_init


def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def correct(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T / np.sqrt(k.shape[1])) @ v


def softmax_wrong_axis(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T / np.sqrt(k.shape[1]), axis=0) @ v


def missing_scale(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T) @ v


def scale_by_d_in(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T / np.sqrt(x.shape[1])) @ v


def scale_not_sqrt(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T / k.shape[1]) @ v


def swapped_query_key(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(k @ q.T / np.sqrt(k.shape[1])) @ v


def keys_from_values(x, Wq, Wk, Wv):
    q, v = x @ Wq, x @ Wv
    return _softmax(q @ v.T / np.sqrt(v.shape[1])) @ v


def no_softmax(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return (q @ k.T / np.sqrt(k.shape[1])) @ v


def naive_normalisation(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    s = q @ k.T
    return (s / s.sum(axis=1, keepdims=True)) @ v


def context_from_keys(x, Wq, Wk, Wv):
    q, k = x @ Wq, x @ Wk
    return _softmax(q @ k.T / np.sqrt(k.shape[1])) @ k


def weights_transposed(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    return _softmax(q @ k.T / np.sqrt(k.shape[1])).T @ v


def values_not_projected(x, Wq, Wk, Wv):
    q, k = x @ Wq, x @ Wk
    return _softmax(q @ k.T / np.sqrt(k.shape[1])) @ x


def unexpected_causal_mask(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    s = q @ k.T
    s = np.where(np.triu(np.ones(s.shape, bool), 1), -np.inf, s)
    return _softmax(s / np.sqrt(k.shape[1])) @ v


PLANTED = [
    softmax_wrong_axis,
    missing_scale,
    scale_by_d_in,
    scale_not_sqrt,
    swapped_query_key,
    keys_from_values,
    no_softmax,
    naive_normalisation,
    context_from_keys,
    weights_transposed,
    values_not_projected,
    unexpected_causal_mask,
]


@pytest.fixture
def problem():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 4))
    weights = {name: rng.standard_normal((4, 3)) for name in ("W_query", "W_key", "W_value")}
    return x, weights


def _run(impl, x, weights):
    return impl(x, weights["W_query"], weights["W_key"], weights["W_value"])


def test_every_non_causal_catalogue_entry_is_planted():
    assert {f.__name__ for f in PLANTED} == {m.identifier for m in CATALOGUE if not m.causal_only}


def test_a_correct_implementation_gets_no_identifier(problem):
    x, weights = problem
    result = diagnose(x, weights, _run(correct, x, weights))
    assert result.correct
    assert result.matches == () and result.symptoms == () and result.indistinguishable == ()
    assert "correct" in str(result)


def test_float32_output_of_a_correct_implementation_is_correct(problem):
    x, weights = problem
    x32 = x.astype(np.float32)
    w32 = {k: v.astype(np.float32) for k, v in weights.items()}
    assert diagnose(x32, w32, _run(correct, x32, w32)).correct


@pytest.mark.parametrize("impl", PLANTED, ids=lambda f: f.__name__)
def test_diagnose_names_exactly_the_planted_mistake(problem, impl):
    x, weights = problem
    result = diagnose(x, weights, _run(impl, x, weights))
    assert not result.correct
    assert result.matches == (impl.__name__,)
    assert result.max_abs_diff is None or result.max_abs_diff > 1e-2
    text = str(result)
    assert impl.__name__ in text and result.explain(impl.__name__) in text


def test_the_test_problem_separates_every_mistake(problem):
    """The premise of the test above: no two planted outputs coincide, none equals the reference."""
    x, weights = problem
    outputs = {f.__name__: _run(f, x, weights) for f in [correct, *PLANTED]}
    for (a, out_a), (b, out_b) in itertools.combinations(outputs.items(), 2):
        assert out_a.shape != out_b.shape or np.max(np.abs(out_a - out_b)) > 1e-2, (a, b)


def test_catalogue_variants_agree_with_the_independent_implementations(problem):
    x, weights = problem
    W = (weights["W_query"], weights["W_key"], weights["W_value"])
    np.testing.assert_allclose(attention_variant(x, *W), correct(x, *W), atol=1e-12)
    for mistake, impl in zip([m for m in CATALOGUE if not m.causal_only], PLANTED):
        np.testing.assert_allclose(mistake.reproduce(x, *W, False), impl(x, *W), atol=1e-12, err_msg=mistake.identifier)


def test_coinciding_mistakes_are_all_reported():
    """With d_in = d_out**2, 1/sqrt(d_in) = 1/d_out: scale_by_d_in and scale_not_sqrt give the same output."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4))
    weights = {name: rng.standard_normal((4, 2)) for name in ("W_query", "W_key", "W_value")}
    for impl in (scale_by_d_in, scale_not_sqrt):
        result = diagnose(x, weights, _run(impl, x, weights))
        assert result.matches == ("scale_by_d_in", "scale_not_sqrt")


def test_mistakes_that_equal_the_reference_on_this_input_are_not_ruled_out():
    """With d_in == d_out the scale_by_d_in mistake is invisible: report it as not ruled out."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3))
    weights = {name: rng.standard_normal((3, 3)) for name in ("W_query", "W_key", "W_value")}
    result = diagnose(x, weights, _run(scale_by_d_in, x, weights))
    assert result.correct and result.matches == ()
    assert result.indistinguishable == ("scale_by_d_in",)
    assert "not ruled out" in str(result)


def test_an_unknown_mistake_matches_nothing(problem):
    x, weights = problem
    out = _run(correct, x, weights) * 1.5
    result = diagnose(x, weights, out)
    assert not result.correct and result.matches == ()
    assert "no catalogued mistake reproduces it" in str(result)


# ---------------------------------------------------------------------------------------------- symptoms


def test_the_books_famous_wrong_answer_is_outside_the_value_range():
    """The book's causal exercise normalised over dim=1 (queries) of a (b, n, n) batch.

    Reproduced on the book's setup, CausalAttention(3, 2, 6, 0.0) with seed 123 (three bias-free
    nn.Linear(3, 2) layers), whose correct output is the book's; the wrong axis leaves the value
    range, like the -1.4744 of the early printing.
    """
    gen = TorchGenerator(123)
    bound, _ = linear_init_bounds(3)
    names = ("W_query", "W_key", "W_value")
    weights = {name: uniform_init(gen, (2, 3), -bound, bound, np.float32).T for name in names}
    x = npattn.book_batch()
    right = attention_variant(x.astype(np.float64), *weights.values(), causal=True)
    book = [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632], [-0.5675, -0.0843], [-0.5526, -0.0981]]
    np.testing.assert_allclose(right[0, :5], book, atol=1e-4)  # the weights are the book's

    q, k, v = (x @ weights[n] for n in names)
    scores = np.where(npattn.nn.functional.causal_mask(6), -np.inf, q @ np.swapaxes(k, 1, 2))
    wrong = _softmax(scores / np.sqrt(2), axis=1) @ v  # dim=1 of (b, n, n)
    result = diagnose(x, weights, wrong, causal=True)
    assert result.matches == ("softmax_wrong_axis",)
    assert "outside_value_range" in result.identifiers
    assert "-1.1632" in result.explain("outside_value_range")  # row 6, column 1


def test_an_output_outside_the_value_range_is_reported_even_without_a_match():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs()
    out = model(x).copy()
    out[2, 0] = -1.4744  # the early printing's value
    result = diagnose(x, npattn.weights_of(model), out)
    assert result.matches == () and result.identifiers == ("outside_value_range",)
    assert "row 3, column 1 is -1.4744" in str(result)


def test_a_correct_causal_implementation_and_a_missing_mask(problem):
    x, weights = problem
    W = tuple(weights.values())
    causal = attention_variant(x, *W, causal=True)
    assert diagnose(x, weights, causal, causal=True).correct
    result = diagnose(x, weights, _run(correct, x, weights), causal=True)
    assert result.matches == ("missing_causal_mask",)


def test_shape_mismatch_and_non_finite(problem):
    x, weights = problem
    result = diagnose(x, weights, np.zeros((5, 4)))
    assert result.identifiers == ("shape_mismatch",) and result.max_abs_diff is None
    assert "a projection used d_in where d_out was expected" in result.explain("shape_mismatch")
    out = _run(correct, x, weights)
    out[0, 0] = np.nan
    assert "non_finite" in diagnose(x, weights, out).identifiers


def test_diagnose_accepts_a_linear_state_dict(problem):
    x, weights = problem
    state = {f"{name}.weight": w.T for name, w in weights.items()}
    assert diagnose(x, state, _run(missing_scale, x, weights)).matches == ("missing_scale",)


def test_diagnose_rejects_bad_weights(problem):
    x, weights = problem
    with pytest.raises(ConfigError, match="no W_value"):
        diagnose(x, {"W_query": weights["W_query"], "W_key": weights["W_key"]}, np.zeros((5, 3)))
    with pytest.raises(ShapeError, match="W_key"):
        diagnose(x, {**weights, "W_key": np.zeros((4, 2))}, np.zeros((5, 3)))
    with pytest.raises(ShapeError, match=r"x: expected shape \(\.\.\., n, d_in=3\).*got \(5, 4\)"):
        diagnose(x, {k: np.zeros((3, 3)) for k in weights}, np.zeros((5, 3)))  # the weights agree: x is blamed
