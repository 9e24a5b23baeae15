"""gradcheck and gradcheck_stage with forwards that edit their input in place, outputs that are not
arrays of floats, and integer stage inputs (token ids)."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, GradcheckError
from npattn.nn import functional as F


def _doubling_in_place(x: np.ndarray) -> tuple[np.ndarray, None]:
    x *= 2.0
    return x.copy(), None


class _ScalesInPlace(npattn.Linear):
    """out = Linear(1.5 x), the 1.5 applied to the caller's x in place."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x *= 1.5
        return super().forward(x)

    def backward(self, grad_output: np.ndarray) -> np.ndarray:
        return super().backward(grad_output) * 1.5


def test_a_stage_forward_that_edits_its_input_passes_with_a_correct_backward():
    x = np.random.default_rng(0).random((3, 3))
    report = npattn.gradcheck_stage(_doubling_in_place, lambda d, c: (2 * d,), [x])
    assert report.passed and report["input0"].max_abs_error < 1e-8
    with pytest.raises(GradcheckError):  # and a wrong one still fails
        npattn.gradcheck_stage(_doubling_in_place, lambda d, c: (3 * d,), [x])


def test_a_module_forward_that_edits_its_input_passes_with_a_correct_backward():
    x = np.random.default_rng(1).standard_normal((4, 3))
    kept = x.copy()
    assert npattn.gradcheck(_ScalesInPlace(3, 2, rng=1), x).passed
    np.testing.assert_array_equal(x, kept)  # the caller's x is never handed to the forward


class _ReturnsTuple(npattn.Linear):
    def forward(self, x):  # type: ignore[override]
        return super().forward(x), 1


class _ReturnsIntegers(npattn.Linear):
    def forward(self, x: np.ndarray) -> np.ndarray:
        return np.round(super().forward(x)).astype(np.int64)


class _ReturnsNone(npattn.Linear):
    def forward(self, x):  # type: ignore[override]
        super().forward(x)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (_ReturnsTuple, r"must return an ndarray of floats .*got tuple .*gradcheck_stage"),
        (_ReturnsNone, r"must return an ndarray of floats .*got NoneType"),
        (_ReturnsIntegers, r"must return floating-point numbers, got an output of dtype int64"),
    ],
)
def test_gradcheck_refuses_an_output_that_is_not_an_array_of_floats(cls, message):
    with pytest.raises(GradcheckError, match=message):
        npattn.gradcheck(cls(3, 2, rng=1), np.random.default_rng(2).standard_normal((4, 3)))


def test_gradcheck_stage_refuses_an_integer_output():
    with pytest.raises(GradcheckError, match="dtype int64"):
        npattn.gradcheck_stage(lambda x: (np.round(x).astype(np.int64), None), lambda d, c: (d,), [np.ones((2, 2))])


def test_integer_stage_inputs_pass_through_unconverted_and_unchecked():
    W = np.random.default_rng(3).standard_normal((5, 3))
    idx = np.array([[0, 4, 2, 4]], dtype=np.int64)
    report = npattn.gradcheck_stage(F.embedding_forward, F.embedding_backward, [W, idx], names=["W", "idx"])
    assert report.passed and [c.name for c in report.checks] == ["W"]

    def wrong_backward(d_out, cache):
        (dW,) = F.embedding_backward(d_out, cache)
        return dW * 1.001, None  # one per input: the integer input's entry is ignored

    with pytest.raises(GradcheckError, match="gradient of W"):
        npattn.gradcheck_stage(F.embedding_forward, wrong_backward, [W, idx], names=["W", "idx"])


def test_only_integer_inputs_is_refused():
    with pytest.raises(ConfigError, match="every input is integer or boolean"):
        npattn.gradcheck_stage(lambda i: (np.ones(3)[i], None), lambda d, c: (d,), [np.array([1, 2])])


def test_a_forward_returning_a_torch_tensor_is_still_checked():
    torch = pytest.importorskip("torch")

    class ReturnsTensor(npattn.Linear):
        def forward(self, x):  # type: ignore[override]
            return torch.from_numpy(super().forward(x))

    assert npattn.gradcheck(ReturnsTensor(3, 2, rng=1), np.random.default_rng(4).standard_normal((4, 3))).passed
