"""gradcheck runs a forward and a backward on another input before the checked ones: a module whose
backward replays its first call's gradients gives that input's gradient and fails, saying so."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.errors import GradcheckError


class Memo(npattn.SelfAttention_v1):
    """A backward that memoises its first call's gradients and replays them."""

    def backward(self, grad_output):
        if not hasattr(self, "_memo"):
            dx = super().backward(grad_output)
            self._memo = (dx.copy(), {n: p.grad.copy() for n, p in self.named_parameters()})
            return dx
        dx, grads = self._memo
        for n, p in self.named_parameters():
            p.grad = grads[n].copy() if p.grad is None else p.grad + grads[n]
        return dx.copy()


def test_a_backward_that_replays_its_first_call_fails_with_the_reason():
    with pytest.raises(GradcheckError, match="backward gives another input's gradient") as info:
        npattn.gradcheck(Memo(3, 2, rng=1), npattn.book_inputs())
    assert "keeps state between calls" in str(info.value)


def test_an_ordinary_wrong_backward_gets_no_memo_reason():
    class Off(npattn.SelfAttention_v1):
        def backward(self, grad_output):
            return super().backward(grad_output) * 1.0001

    report = npattn.gradcheck(Off(3, 2, rng=1), npattn.book_inputs(), raise_exception=False)
    assert not report and report.reason == ""


def test_a_correct_module_passes_and_is_left_untouched():
    module = npattn.SelfAttention_v1(3, 2, rng=1)
    before = {n: (p.data.copy(), None if p.grad is None else p.grad.copy()) for n, p in module.named_parameters()}
    assert npattn.gradcheck(module, npattn.book_inputs())
    for n, p in module.named_parameters():
        np.testing.assert_array_equal(p.data, before[n][0])
        assert (p.grad is None) == (before[n][1] is None)
