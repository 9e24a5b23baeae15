"""The backward check runs the backward again after a forward on a second input: a backward that
keeps its first forward's cache, or returns a running sum of its gradients, is right only once."""

import pytest
import stale_learners as S

from npattn.book import book_inputs
from npattn.debug.backcheck import check_backward
from npattn.debug.userbackward import object_callables
from npattn.debug.usercode import attention_from_module, book_weights, check_attention


@pytest.mark.parametrize(
    "cls, reason",
    [("StaleCache", "returns the first input's gradients again"), ("RunningSum", "a running sum it never resets")],
)
def test_a_backward_that_keeps_state_fails_with_its_reason(cls, reason):
    forward, backward = object_callables(getattr(S, cls)(3, 2), cls)
    report = check_backward(forward, backward, book_inputs(), book_weights(), name=cls)
    assert not report and "right after the first forward but wrong after a forward on a second input" in str(report)
    assert reason in report.verdict()


def test_a_correct_backward_still_passes():
    assert check_backward(*object_callables(S.Fresh(3, 2), "Fresh"), book_inputs(), book_weights(), name="Fresh")


@pytest.mark.parametrize("cls, passes", [("Fresh", True), ("StaleCache", False), ("RunningSum", False)])
def test_npattn_check_judges_the_backward_after_a_second_forward(cls, passes):
    report = check_attention(attention_from_module(S, cls))
    assert bool(report) is passes and bool(report.backward) is passes
