"""Property-based tests (hypothesis): what must hold for every shape and every input.

Shapes: n from 1 to 64 tokens, d_in and d_out from 1 to 16, unbatched or a batch of 1 to 3.
Values: drawn from a seed and a kind (normal at several scales, small integers, repeated tokens,
zeros), so examples stay fast at every size. Every class in ATTENTION_CASES is tested.

Profiles (tests/conftest.py): "ci" by default (50 examples per property, the same each run);
NPATTN_HYPOTHESIS_PROFILE=long for 2000 fresh examples per property.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from attention_cases import ATTENTION_CASES, AttentionCase, record_stages
from planted import plant

import npattn

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
given = hypothesis.given

KINDS = ["normal", "tiny", "large", "small integers", "repeated tokens", "zeros"]


@dataclass
class Example:
    x: np.ndarray
    d_in: int
    d_out: int
    seed: int

    def __repr__(self) -> str:
        return f"Example(x shape {self.x.shape}, d_out={self.d_out}, seed={self.seed})"


def _values(rng: np.random.Generator, kind: str, shape: tuple[int, ...], scale: float) -> np.ndarray:
    if kind == "small integers":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "repeated tokens":
        tokens = rng.standard_normal((*shape[:-2], 2, shape[-1]))
        return tokens[..., rng.integers(0, 2, shape[-2]), :] * scale
    if kind == "zeros":
        return np.zeros(shape)
    return rng.standard_normal(shape) * {"normal": scale, "tiny": 1e-6, "large": 30.0}[kind]


@st.composite
def examples(draw: st.DrawFn, case: AttentionCase, max_scale: float = 3.0) -> Example:
    n = draw(st.integers(1, min(64, case.max_tokens or 64)))
    d_in = draw(st.integers(1, 16))
    d_out = draw(st.integers(1, 16))
    batch = draw(st.sampled_from([(1,), (2,), (3,)] if not case.accepts_2d else [(), (1,), (2,), (3,)]))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(KINDS if max_scale > 1 else ["normal", "tiny", "small integers", "zeros"]))
    scale = draw(st.floats(1e-3, max_scale))
    x = _values(np.random.default_rng(seed), kind, (*batch, n, d_in), scale)
    return Example(x, d_in, d_out, seed)


def build(case: AttentionCase, ex: Example, dtype: type = np.float64) -> npattn.Module:
    return case.build(ex.d_in, ex.d_out, ex.seed, dtype).eval()


def _batched(x: np.ndarray) -> np.ndarray:
    return x if x.ndim == 3 else x[None]


CASES = pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
REL = 1e-8  # float64 sums in another order; cancellation (softmax backward, saturated rows) costs digits


def assert_close(actual: np.ndarray, expected: np.ndarray, scale: float | None = None) -> None:
    """Equal up to REL times ``scale`` (default: the expected array's largest magnitude)."""
    scale = np.max(np.abs(expected), initial=0) if scale is None else scale
    np.testing.assert_allclose(actual, expected, rtol=0, atol=REL * scale + 1e-300)


def assert_same_parameter_grads(model: npattn.Module, expected: list[np.ndarray]) -> None:
    """Relative to the model's largest parameter gradient: when every softmax row saturates, a small
    gradient (W_query's, W_key's) is the difference of far larger terms and keeps fewer digits."""
    scale = max(float(np.max(np.abs(g), initial=0)) for g in expected)
    for p, g in zip(model.parameters(), expected):
        assert_close(p.grad, g, scale)


@CASES
@given(data=st.data())
def test_forward_is_finite_rows_sum_to_one_and_outputs_are_convex_combinations(case, data):
    ex = data.draw(examples(case))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    model = build(case, ex, dtype)
    seen = record_stages(model)
    out = model(ex.x)
    assert out.dtype == dtype and np.all(np.isfinite(out))
    eps = np.finfo(dtype).eps
    assert seen["attn_weights"], "the model records no attention weights"
    for weights in seen["attn_weights"]:
        assert np.all(weights >= 0)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=8 * eps * weights.shape[-1])
    for values, context in zip(seen["values"], seen["context_vec"]):
        if values.shape[:-2] != context.shape[:-2]:
            continue  # values recorded before a split into heads: no row-for-row match
        # each context row is a convex combination of the value vectors: inside their range, per column
        tol = 8 * eps * values.shape[-2] * (np.max(np.abs(values)) + 1e-30)
        assert np.all(context >= values.min(axis=-2, keepdims=True) - tol)
        assert np.all(context <= values.max(axis=-2, keepdims=True) + tol)


@CASES
@given(data=st.data())
def test_batched_equals_a_loop_over_sequences(case, data):
    ex = data.draw(examples(case))
    x = _batched(ex.x)
    model = build(case, ex)
    g = np.random.default_rng(ex.seed).standard_normal((*x.shape[:-1], ex.d_out))
    out, dx = model(x), model.backward(g)
    batched_grads = [p.grad.copy() for p in model.parameters()]
    model.zero_grad()
    for i in range(x.shape[0]):
        assert_close(model(x[i : i + 1])[0], out[i])
        assert_close(model.backward(g[i : i + 1])[0], dx[i])
    assert_same_parameter_grads(model, batched_grads)


@pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if not c.causal], ids=str)
@given(data=st.data())
def test_permuting_tokens_permutes_output_rows(case, data):
    ex = data.draw(examples(case))
    n = ex.x.shape[-2]
    perm = np.array(data.draw(st.permutations(range(n))))
    model = build(case, ex)
    g = np.random.default_rng(ex.seed).standard_normal((*ex.x.shape[:-1], ex.d_out))
    out, dx = model(ex.x), model.backward(g)
    grads = [p.grad.copy() for p in model.parameters()]
    model.zero_grad()
    out_p, dx_p = model(ex.x[..., perm, :]), model.backward(g[..., perm, :])
    assert_close(out_p, out[..., perm, :])
    assert_close(dx_p, dx[..., perm, :])
    assert_same_parameter_grads(model, grads)


@CASES
@given(data=st.data())
def test_gradients_match_finite_differences(case, data):
    ex = data.draw(examples(case, max_scale=1.0))
    model = build(case, ex)
    # gradcheck refuses an atol that could not fail a gradient off by 0.01%, and the inputs'
    # scales (1e-3 to 1) give gradients down to ~1e-5: scale atol with them.
    g = np.random.default_rng(ex.seed).standard_normal(model(ex.x).shape)
    grads = [model.backward(g)] + [p.grad for p in model.parameters()]
    scale = max(float(np.max(np.abs(a), initial=0.0)) for a in grads)
    npattn.gradcheck(model, ex.x, fast_mode=True, seed=ex.seed, atol=min(1e-8, 1e-6 * scale))


# ----------------------------------------------------------------------------------------------
# Each property can fail: a planted bug in one stage makes hypothesis find a counterexample.

F = npattn.functional
_softmax_forward, _context_forward, _scores_forward, _softmax_backward = (
    F.softmax_forward,
    F.context_forward,
    F.scores_forward,
    F.softmax_backward,
)
PLANTED = {
    "softmax over the queries axis": (
        "softmax_forward",
        lambda s, scale: (F.softmax(s * scale, axis=-2), (F.softmax(s * scale, axis=-2), scale)),
        test_forward_is_finite_rows_sum_to_one_and_outputs_are_convex_combinations,
    ),
    "values of the batch reversed": (
        "context_forward",
        lambda a, v: _context_forward(a, v[::-1] if v.ndim == 3 else v),
        test_batched_equals_a_loop_over_sequences,
    ),
    "a positional bias in the scores": (
        "scores_forward",
        lambda q, k: (lambda s, c: (s + np.arange(s.shape[-1]), c))(*_scores_forward(q, k)),
        test_permuting_tokens_permutes_output_rows,
    ),
    "softmax backward without the scale": (
        "softmax_backward",
        lambda d, c: _softmax_backward(d, (c[0], 1.0)),
        test_gradients_match_finite_differences,
    ),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_each_property_rejects_a_planted_bug(monkeypatch, bug):
    name, planted, prop = PLANTED[bug]
    plant(monkeypatch, name, planted)
    quick = hypothesis.settings(max_examples=50, derandomize=True, database=None, phases=[hypothesis.Phase.generate])
    run = quick(given(data=st.data())(prop.hypothesis.inner_test))
    with pytest.raises((AssertionError, npattn.GradcheckError)):
        run(case=ATTENTION_CASES[0])
