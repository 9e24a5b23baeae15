"""gradcheck_stage and gradcheck refuse what a backward returns that is no real gradient, check
integer inputs the forward accepts as numbers, survive 0-d inputs, and use the small-gradient
tolerance under the default atol. Each check is proven on planted bugs."""

import warnings

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, GradcheckError
from npattn.nn import functional as F

X = np.random.default_rng(0).standard_normal((3, 4))


def square(x):
    return x * x, x.copy()


@pytest.mark.parametrize(
    ("grad", "problem"),
    [
        (lambda d, c: 2 * d * c + 5j, r"complex \(complex128\)"),
        (lambda d, c: (2 * d * c).astype(str), "strings"),
        (lambda d, c: d > 0, r"booleans \(bool\)"),
        (lambda d, c: None, r"missing \(None\)"),
        (lambda d, c: np.array([1j, "a"] * 6, dtype=object).reshape(3, 4), "not a numeric array"),
    ],
)
def test_stage_refuses_a_gradient_that_is_not_real(grad, problem):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: refused before any conversion
        with pytest.raises(GradcheckError, match=f"gradient of input0 is {problem}"):
            npattn.gradcheck_stage(square, lambda d, c: (grad(d, c),), [X])


def test_stage_accepts_an_object_array_of_real_numbers():
    assert npattn.gradcheck_stage(square, lambda d, c: ((2 * d * c).astype(object),), [X]).passed


def test_module_refuses_a_complex_dx():
    class ComplexX(npattn.Linear):
        def backward(self, grad_output):  # type: ignore[override]
            return super().backward(grad_output) + 1j

    x = np.random.default_rng(1).standard_normal((4, 3))
    with pytest.raises(GradcheckError, match=r"gradient of x is complex"):
        npattn.gradcheck(ComplexX(3, 2, rng=1), x)


def _scores_dq_times_3(d, c):
    dq, dk = F.scores_backward(d, c)
    return dq * 3, dk


def test_integer_inputs_the_forward_accepts_as_numbers_are_checked():
    queries, keys = np.arange(6).reshape(3, 2), np.random.default_rng(2).standard_normal((4, 2))
    report = npattn.gradcheck_stage(F.scores_forward, F.scores_backward, [queries, keys], names=["queries", "keys"])
    assert report.passed and [c.name for c in report.checks] == ["queries", "keys"]
    with pytest.raises(GradcheckError, match="gradient of queries is wrong"):
        npattn.gradcheck_stage(F.scores_forward, _scores_dq_times_3, [queries, keys], names=["queries", "keys"])
    flags = np.random.default_rng(3).random((3, 2)) > 0.5  # booleans: the same rule
    with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
        npattn.gradcheck_stage(F.scores_forward, _scores_dq_times_3, [flags, keys])


def test_token_ids_are_named_as_not_checked():
    W = np.random.default_rng(3).standard_normal((5, 3))
    idx = np.array([[0, 4, 2, 4]])
    report = npattn.gradcheck_stage(F.embedding_forward, F.embedding_backward, [W, idx], names=["W", "idx"])
    text = str(report)
    assert report.passed and "PASSED (idx: integer ids, not checked)" in text
    assert "idx: integer ids, not checked" in report.note
    assert "note: idx: integer ids, not checked: passed to the forward unchanged" in text


def test_integer_inputs_the_forward_accepts_are_checked_even_alone():
    with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
        npattn.gradcheck_stage(lambda i: (i * i, i), lambda d, c: (3 * d * c,), [np.array([1, 2])])


def test_only_token_ids_is_refused():
    with pytest.raises(ConfigError, match="every input is integer or boolean"):
        npattn.gradcheck_stage(lambda i: (np.ones(3)[i], None), lambda d, c: (d,), [np.array([1, 2])])


@pytest.mark.parametrize("value", [np.array(1.5), 1.5])
def test_a_0d_input_is_checked_not_crashed(value):
    assert npattn.gradcheck_stage(lambda x: (x * x, x), lambda d, c: (2 * c * d,), [value]).passed
    wrong = r"gradient of input0 is wrong at index \(\): numerical -?[\d.]+, analytical -?[\d.]+"
    with pytest.raises(GradcheckError, match=wrong):
        npattn.gradcheck_stage(lambda x: (x * x, x), lambda d, c: (3 * c * d,), [value])


def test_a_scalar_second_input_with_a_wrong_gradient():
    def forward(x, s):
        return x * s, (x, s)

    def backward(d, c, wrong=1.0):
        x, s = c
        return d * s, wrong * np.sum(d * x)

    assert npattn.gradcheck_stage(forward, backward, [X, 2.0]).passed
    with pytest.raises(GradcheckError, match=r"gradient of input1 is wrong at index \(\)"):
        npattn.gradcheck_stage(forward, lambda d, c: backward(d, c, 1.5), [X, 2.0])


@pytest.mark.parametrize("size", [1e-6, 1e-10, 1e-12])
@pytest.mark.parametrize("factor", [1.0, 1.0002, 1.5, -1.0])
def test_small_gradients_get_the_small_gradient_tolerance_by_default(size, factor):
    def forward(x):
        return size * x * x, x.copy()

    def backward(d, c):
        return (factor * 2 * size * d * c,)

    x = np.random.default_rng(4).standard_normal((3, 4))
    if factor == 1.0:
        assert npattn.gradcheck_stage(forward, backward, [x]).passed
    else:
        with pytest.raises(GradcheckError, match="gradient of input0 is wrong"):
            npattn.gradcheck_stage(forward, backward, [x])
    with pytest.raises(ConfigError, match="atol=1e-08 is too wide"):  # a given atol is still refused
        npattn.gradcheck_stage(forward, backward, [x], atol=1e-8)


class _Tiny(npattn.Module):
    """y = size * x @ W, with its backward scaled by ``factor`` (1.0: right)."""

    def __init__(self, size, factor):
        super().__init__()
        self.W = npattn.Parameter(np.random.default_rng(5).standard_normal((3, 2)))
        self.size, self.factor = size, factor

    def forward(self, x):
        self.x = x
        return self.size * x @ self.W.data

    def backward(self, grad_output):
        self.W.grad = (0 if self.W.grad is None else self.W.grad) + self.factor * self.size * self.x.T @ grad_output
        return self.size * grad_output @ self.W.data.T


@pytest.mark.parametrize("size", [1e-6, 1e-10])
@pytest.mark.parametrize("factor", [1.0, 1.0002, 1.5, -1.0])
def test_a_module_with_small_gradients(size, factor):
    x = np.random.default_rng(6).standard_normal((4, 3))
    if factor == 1.0:
        assert npattn.gradcheck(_Tiny(size, factor), x).passed
    else:
        with pytest.raises(GradcheckError, match="gradient of W is wrong"):
            npattn.gradcheck(_Tiny(size, factor), x)


def test_a_number_passed_as_an_input_is_a_config_error():
    S = np.random.default_rng(7).standard_normal((3, 5))
    with pytest.raises(ConfigError, match=r"input1 \(0\.5\) is a number the backward gives no gradient for.*kwargs="):
        npattn.gradcheck_stage(F.softmax_forward, F.softmax_backward, [S, 0.5])


def test_a_bare_array_from_the_backward_is_a_config_error():
    must = r"the backward must return a tuple \(one gradient per input, here 1\), got ndarray"
    with pytest.raises(ConfigError, match=must):
        npattn.gradcheck_stage(square, lambda d, c: 2 * d * c, [X])
