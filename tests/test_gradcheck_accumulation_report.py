"""A backward that assigns ``.grad`` instead of adding to it: ``gradcheck(raise_exception=False)``
raised the GradcheckError anyway; it now returns a failed report that says why (and still raises
by default)."""

import numpy as np
import pytest

import npattn
from npattn.errors import GradcheckError


class Assigns(npattn.SelfAttention_v1):
    def backward(self, grad_output):
        for p in self.parameters():
            p.grad[...] = 0
        return super().backward(grad_output)


X = np.random.default_rng(0).normal(size=(4, 3))


def test_the_report_is_returned_failed_with_the_reason():
    report = npattn.gradcheck(Assigns(3, 2, rng=1), X, raise_exception=False)
    assert not report.passed and not report.failures
    assert str(report).endswith(
        "W_query.grad is not twice the first gradient: backward must add its gradient to .grad once "
        "(param.grad += ..., as PyTorch accumulates), neither assign nor rescale .grad"
    )
    assert "keeps state between calls" not in str(report)


def test_by_default_it_raises_naming_the_reason_first():
    with pytest.raises(GradcheckError, match=r"^gradcheck: after a second backward, W_query\.grad is not twice"):
        npattn.gradcheck(Assigns(3, 2, rng=1), X)


def test_a_backward_that_adds_passes():
    assert npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=1), X, raise_exception=False).passed
