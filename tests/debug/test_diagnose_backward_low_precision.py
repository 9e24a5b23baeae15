"""``diagnose_backward`` judged npattn's own correct float32 and float16 gradients wrong: a fixed
rtol of 1e-4, where float32 itself is off by 2e-3 (S = 131) and float16 by 5e-4. Low-precision
gradients are now judged against what the same backward makes in float32 on that input; a gradient
float32 cannot carry to 1% is named as one to compute in float64, and real mistakes still fail."""

import numpy as np
import pytest

import npattn
import npattn.debug


def grads_of(model, x):
    out = model(x)
    G = np.random.default_rng(0).standard_normal(out.shape).astype(out.dtype)
    dx = model.backward(G)
    return G, {"x": dx, "W_query": model.W_query.grad, "W_key": model.W_key.grad, "W_value": model.W_value.grad}


@pytest.mark.parametrize("half", [False, True], ids=["float32", "float16"])
def test_npattns_own_low_precision_gradients_are_correct(half):
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    model = model.half() if half else model
    G, grads = grads_of(model, npattn.book_inputs())
    assert npattn.debug.diagnose_backward(npattn.book_inputs(), npattn.weights_of(model), G, grads).correct
    grads["W_value"] = grads["W_value"] * 1.01
    result = npattn.debug.diagnose_backward(npattn.book_inputs(), npattn.weights_of(model), G, grads)
    assert not result.correct and result.first_wrong == "W_value"


def test_a_gradient_float32_cannot_carry_is_named():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs() * 10  # S = 131: W_key's float32 gradient is 1.7% off float64's
    G, grads = grads_of(model, x)
    result = npattn.debug.diagnose_backward(x, npattn.weights_of(model), G, grads)
    assert not result.correct and not result.matches
    assert any(p.startswith("dW_key cannot be judged in float32") for p in result.problems)
    assert not any(p.startswith("dW_value") for p in result.problems)


def test_a_gradient_not_judged_is_not_called_wrong_in_the_report():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs() * 10
    G, grads = grads_of(model, x)
    text = "\n".join(npattn.debug.diagnose_backward(x, npattn.weights_of(model), G, grads).lines())
    assert "NOT JUDGED: dW_key cannot be judged in float32" in text and "WRONG" not in text


def test_a_wrong_gradient_beside_one_not_judged_is_called_wrong():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    x = npattn.book_inputs() * 10
    G, grads = grads_of(model, x)
    grads["W_value"] = grads["W_value"] * 2
    result = npattn.debug.diagnose_backward(x, npattn.weights_of(model), G, grads)
    text = "\n".join(result.lines())
    assert result.first_wrong == "W_value" and "WRONG: dW_value differs from npattn's gradient" in text
