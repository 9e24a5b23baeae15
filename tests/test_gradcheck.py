"""Whole-module gradient checks: SelfAttention_v1 over several shapes, the margin of a correct
backward, and proof that the check rejects planted bugs and a 0.01% error in any one tensor."""

import math

import numpy as np
import planted
import pytest
from planted import plant

import npattn
from npattn.gradcheck import DIFFERENCE_NOISE
from npattn.nn import functional as F

GRID = [  # (batch or None, n, d_in, d_out)
    (None, 1, 3, 2),
    (None, 6, 3, 2),
    (None, 5, 4, 7),
    (None, 4, 3, 1),
    (None, 33, 5, 4),
    (3, 6, 3, 2),
]


def make(d_in, d_out, seed=0):
    return npattn.SelfAttention_v1(d_in, d_out, rng=np.random.default_rng(seed), dtype=np.float64)


def make_x(batch, n, d_in, seed=1):
    shape = (n, d_in) if batch is None else (batch, n, d_in)
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("batch,n,d_in,d_out", GRID)
def test_self_attention_v1_passes_with_margin(batch, n, d_in, d_out):
    report = npattn.gradcheck(make(d_in, d_out), make_x(batch, n, d_in))
    assert report and report.passed
    assert [c.name for c in report.checks] == ["W_query", "W_key", "W_value", "x"]
    for check in report.checks:
        assert check.margin >= 100, f"{check.name}: margin {check.margin:.1f} < 100\n{report}"


def test_book_example_passes():
    report = npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=123), npattn.book_inputs())
    assert report
    assert "W_query" in str(report) and "PASSED" in str(report)


def test_fast_mode_passes_and_is_directional():
    report = npattn.gradcheck(make(16, 8), make_x(2, 40, 16), fast_mode=True, n_directions=3)
    assert report and all(c.directional for c in report.checks)


def test_gradcheck_leaves_the_module_untouched():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    before = model.state_dict()
    npattn.gradcheck(model, npattn.book_inputs())
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
        assert value.dtype == np.float32
    assert not any(np.any(p.grad) for p in model.parameters())


def test_gradcheck_errors():
    class NoParams(npattn.Module):
        def forward(self, x):
            return x

    with pytest.raises(npattn.ConfigError, match="no parameters"):
        npattn.gradcheck(NoParams(), np.ones((2, 3)))
    with pytest.raises(npattn.DTypeError, match="floating"):
        npattn.gradcheck(make(3, 2), np.ones((2, 3), dtype=np.int64))


# ------------------------------------------------------------------ 0.01% in any one tensor


@pytest.mark.parametrize("target", ["W_query", "W_key", "W_value", "x"])
@pytest.mark.parametrize("batch,n,d_in,d_out", [(None, 6, 3, 2), (None, 5, 4, 7), (2, 6, 3, 2)])
def test_detects_gradient_off_by_one_hundredth_percent(monkeypatch, target, batch, n, d_in, d_out):
    model = make(d_in, d_out)
    original = npattn.SelfAttention_v1.backward

    def slightly_wrong(self, grad_output):
        before = {name: p.grad.copy() for name, p in self.named_parameters()}
        dx = original(self, grad_output)
        if target == "x":
            return dx * 1.0001
        p = getattr(self, target)
        p.grad[...] = before[target] + (p.grad - before[target]) * 1.0001
        return dx

    monkeypatch.setattr(npattn.SelfAttention_v1, "backward", slightly_wrong)
    report = npattn.gradcheck(model, make_x(batch, n, d_in), raise_exception=False)
    assert not report
    assert [c.name for c in report.failures] == [target]


# ------------------------------------------------------------------ planted bugs, module level


def _planted_bugs(d_in, d_out):
    """name -> {functional attribute: broken replacement}."""
    T = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731

    project_qkv_backward, attention_backward = F.project_qkv_backward, F.attention_backward

    def project_dx_missing_value_path(d_queries, d_keys, d_values, cache):
        dx, *_ = project_qkv_backward(d_queries, d_keys, np.zeros_like(d_values), cache)
        _, *dWs = project_qkv_backward(d_queries, d_keys, d_values, cache)
        return (dx, *dWs)

    def attention_dV_from_scores(d_z, cache):
        c_scores = cache[0]
        d_q, d_k, _ = attention_backward(d_z, cache)
        q, k = c_scores
        return d_q, d_k, T(q @ T(k)) @ d_z

    return {
        "sign flip in the softmax backward": {"softmax_backward": planted.softmax_sign_flip},
        "softmax backward over the wrong axis": {"softmax_backward": planted.softmax_wrong_axis},
        "missing scale in dQ/dK": {"softmax_backward": planted.softmax_missing_scale},
        "scale by 1/sqrt(d_in)": {"softmax_backward": planted.softmax_scaled_by(math.sqrt(d_in))},
        "dK with a missing transpose": {"scores_backward": planted.scores_dK_missing_transpose},
        "dX missing the value path": {"project_qkv_backward": project_dx_missing_value_path},
        "dV from the scores instead of the weights": {"attention_backward": attention_dV_from_scores},
        "dA with V reshaped instead of transposed": {"context_backward": planted.context_dA_reshaped_not_transposed},
    }


PLANTED = sorted(_planted_bugs(4, 3))


@pytest.mark.parametrize("bug", PLANTED)
def test_gradcheck_rejects_planted_bug(monkeypatch, bug):
    d_in, d_out = 4, 3
    model = make(d_in, d_out)
    x = make_x(None, 5, d_in)
    assert npattn.gradcheck(model, x)  # the same problem passes without the bug
    for attr, broken in _planted_bugs(d_in, d_out)[bug].items():
        plant(monkeypatch, attr, broken)
    with pytest.raises(npattn.GradcheckError) as info:
        npattn.gradcheck(model, x)
    message = str(info.value)
    assert "numerical" in message and "analytical" in message and "index" in message


# ----------------------------------------------------------------------------------------------
# The defaults are pinned: a gradient off by 0.01% at magnitudes around 1e-3 fails both checks.
# With either default 100 times wider, the same calls pass (atol) or are refused (rtol).


class _Off(npattn.Module):
    """1e-3 * SelfAttention_v1 (so that its gradients are of magnitude about 1e-3), whose backward
    is multiplied by ``factor`` (dx and every parameter gradient)."""

    def __init__(self, factor):
        super().__init__()
        self.inner = make(3, 2)
        self.factor = factor

    def forward(self, x):
        return self.inner(x) * 1e-3

    def _gradients(self, grad_output):
        dx, grads = self.inner._gradients(np.asarray(grad_output) * 1e-3)
        return dx * self.factor, [(p, d * self.factor) for p, d in grads]


def _small_x():
    return make_x(None, 6, 3)


def _stage_1e3(a):
    return a * 1e-3, None


def _stage_1e3_backward_off(d, cache):
    return (d * 1e-3 * 1.0001,)


def test_defaults_are_pinned():
    import inspect

    for check in (npattn.gradcheck, npattn.gradcheck_stage):
        params = inspect.signature(check).parameters
        assert (params["eps"].default, params["atol"].default, params["rtol"].default) == (1e-6, None, 1e-6)
    # atol=None: 1e-8, or the finite differences' rounding noise when larger
    assert DIFFERENCE_NOISE == 10.0


def test_defaults_fail_a_gradient_off_by_a_hundredth_percent_at_magnitude_1e3():
    x = _small_x()
    report = npattn.gradcheck(_Off(1.0), x)  # a correct backward at this scale passes
    assert 5e-4 < max(c.scale for c in report.checks) < 5e-3
    with pytest.raises(npattn.GradcheckError):
        npattn.gradcheck(_Off(1.0001), x)
    a = [np.random.default_rng(3).standard_normal((4, 3))]
    npattn.gradcheck_stage(_stage_1e3, lambda d, c: (d * 1e-3,), a)
    with pytest.raises(npattn.GradcheckError):
        npattn.gradcheck_stage(_stage_1e3, _stage_1e3_backward_off, a)


def test_defaults_100_times_wider_could_not_catch_it():
    """What the pinning guards against: atol x 100 or rtol x 100 could not fail the 0.01% error at
    this magnitude, so both are refused as checks that cannot fail."""
    x = _small_x()
    a = [np.random.default_rng(3).standard_normal((4, 3))]
    with pytest.raises(npattn.ConfigError, match="atol=1e-06 is too wide"):
        npattn.gradcheck(_Off(1.0001), x, atol=1e-6)
    with pytest.raises(npattn.ConfigError, match="atol=1e-06 is too wide"):
        npattn.gradcheck_stage(_stage_1e3, _stage_1e3_backward_off, a, atol=1e-6)
    with pytest.raises(npattn.ConfigError, match="rtol must be below"):
        npattn.gradcheck(_Off(1.0001), x, rtol=1e-4)
    with pytest.raises(npattn.ConfigError, match="rtol must be below"):
        npattn.gradcheck_stage(_stage_1e3, _stage_1e3_backward_off, a, rtol=1e-4)


@pytest.mark.parametrize("atol, rtol", [(1.0, 1e-6), (1e-2, 1e-6), (1e3, 0.0)])
def test_tolerances_that_would_pass_a_sign_flip_are_refused(atol, rtol):
    with pytest.raises(npattn.ConfigError, match="too wide for these gradients"):
        npattn.gradcheck(_Off(-1.0), make_x(None, 6, 3), atol=atol, rtol=rtol)
    with pytest.raises(npattn.ConfigError, match="too wide for these gradients"):
        npattn.gradcheck_stage(lambda a: (a * 1.0, None), lambda d, c: (-d,), [np.ones((4, 3))], atol=atol, rtol=rtol)


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 3), (0, 6, 3)])
def test_an_input_with_no_elements_is_refused(shape):
    with pytest.raises(npattn.ConfigError, match="at least one element"):
        npattn.gradcheck(make(3, 2), np.zeros(shape))
    with pytest.raises(npattn.ConfigError, match="at least one element"):
        npattn.gradcheck_stage(lambda a: (a * 1.0, None), lambda d, c: (d,), [np.zeros(shape)])


def test_a_zero_gradient_is_still_checked():
    """All-zero numerical gradients (softmax over one key) are compared with atol: a nonzero analytical one fails."""
    z = np.random.default_rng(0).standard_normal((4, 1))
    npattn.gradcheck_stage(F.softmax_forward, F.softmax_backward, [z], kwargs={"scale": 1.0})
    with pytest.raises(npattn.GradcheckError):
        npattn.gradcheck_stage(F.softmax_forward, lambda d, c: (d,), [z], kwargs={"scale": 1.0})
