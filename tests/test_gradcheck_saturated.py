"""A gradient a few times below eps's rounding noise (W_query's behind a saturated softmax, ~6e-8)
is judged at the step where the differences are sharpest: at eps alone its atol was that noise,
~1e-8, and a gradient 10% or 15% off passed."""

import numpy as np
import pytest

import npattn
from npattn.errors import GradcheckError

X = npattn.book_inputs().astype(np.float64)


class Scaled(npattn.SelfAttention_v1):
    """W_query's gradient times ``factor``: a planted bug of a chosen size."""

    factor = 1.0

    def backward(self, grad):
        before = self.W_query.grad.copy() if self.W_query.grad is not None else 0.0
        dx = super().backward(grad)
        self.W_query.grad[...] = before + (self.W_query.grad - before) * self.factor
        return dx


def _saturated(factor, size=30.0):
    """size 30: scores of ~100, softmax rows nearly one-hot, W_query's gradient ~6e-8; size 1e-4:
    weights so small that W_query's gradient, ~3e-6, sits near the noise of the larger outputs."""
    model = type("Planted", (Scaled,), {"factor": factor})(3, 2, rng=123, dtype=np.float64)
    model.W_query.data *= size
    model.W_key.data *= size
    return model


def test_the_right_gradient_passes_with_a_note_on_the_step():
    report = npattn.gradcheck(_saturated(1.0), X)
    assert report.passed
    assert next(c.scale for c in report.checks if c.name == "W_query") < 1e-7  # the case in question
    assert "W_query's gradient (largest" in str(report)


@pytest.mark.parametrize("factor", [1.15, 1.1, 1.01, -1.0])
def test_a_wrong_gradient_fails(factor):
    with pytest.raises(GradcheckError, match="gradient of W_query is wrong"):
        npattn.gradcheck(_saturated(factor), X)


@pytest.mark.parametrize("factor", [1.0, 1.001])
def test_tiny_weights_are_judged_to_a_tenth_of_a_percent(factor):
    assert npattn.gradcheck(_saturated(factor, size=1e-4), X, raise_exception=False).passed == (factor == 1.0)


def test_a_gradient_below_atol_is_sharpened_past_the_step_that_resolves_its_sign():
    """At weights x 36 W_query's gradient (~3e-10) is below atol: the search stopped at the first step
    where a sign flip fails (1e-4, allowed 1e-10), and a gradient 30% off passed there."""
    with pytest.raises(GradcheckError, match="gradient of W_query is wrong"):
        npattn.gradcheck(_saturated(1.3, size=36.0), X)


def test_a_gradient_judged_coarsely_at_its_best_step_says_so():
    report = npattn.gradcheck(_saturated(1.0, size=40.0), X)  # W_query's gradient ~5e-12: the noise is 1e-12
    assert report.passed
    assert "note: W_query is judged to 18% of its largest gradient at best" in str(report)
