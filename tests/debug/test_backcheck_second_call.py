"""The backward check runs the backward again after a forward on a second input: a backward that
keeps its first forward's cache, or returns a running sum of its gradients, is right only once."""

import textwrap

import pytest

from npattn.book import book_inputs
from npattn.debug.backcheck import check_backward
from npattn.debug.userbackward import object_callables
from npattn.debug.usercode import book_weights, run_check

SOURCE = textwrap.dedent(
    """
    import numpy as np

    def _forward(x, Wq, Wk, Wv):
        q, k, v = x @ Wq, x @ Wk, x @ Wv
        s = q @ k.T / np.sqrt(k.shape[-1])
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        return a @ v, (x, q, k, v, a)

    def _backward(d, cache, Wq, Wk, Wv):
        x, q, k, v, a = cache
        da, dv = d @ v.T, a.T @ d
        ds = a * (da - (da * a).sum(-1, keepdims=True)) / np.sqrt(k.shape[-1])
        dq, dk = ds @ k, ds.T @ q
        return dq @ Wq.T + dk @ Wk.T + dv @ Wv.T, x.T @ dq, x.T @ dk, x.T @ dv

    class Good:
        def __init__(self, d_in, d_out):
            r = np.random.default_rng(0)
            self.W_query, self.W_key, self.W_value = (r.random((d_in, d_out)) for _ in range(3))

        def forward(self, x):
            out, self.cache = _forward(x, self.W_query, self.W_key, self.W_value)
            return out

        def backward(self, d):
            return _backward(d, self.cache, self.W_query, self.W_key, self.W_value)

    class StaleCache(Good):
        def forward(self, x):
            out, cache = _forward(x, self.W_query, self.W_key, self.W_value)
            if not hasattr(self, "cache"):
                self.cache = cache
            return out

    class RunningSum(Good):
        def backward(self, d):
            dx, *dW = super().backward(d)
            self.total = [t + g for t, g in zip(getattr(self, "total", [0, 0, 0]), dW)]
            return (dx, *self.total)
    """
)


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "mine.py"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def classes(user_file):
    namespace: dict = {}
    exec(compile(SOURCE, str(user_file), "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "cls, reason",
    [("StaleCache", "returns the first input's gradients again"), ("RunningSum", "a running sum it never resets")],
)
def test_a_backward_that_keeps_state_fails_with_its_reason(classes, cls, reason):
    obj = classes[cls](3, 2)
    forward, backward = object_callables(obj, cls)
    report = check_backward(forward, backward, book_inputs(), book_weights(), name=cls)
    assert not report and "right after the first forward but wrong after a forward on a second input" in str(report)
    assert reason in report.verdict()


def test_a_correct_backward_still_passes(classes):
    obj = classes["Good"](3, 2)
    assert check_backward(*object_callables(obj, "Good"), book_inputs(), book_weights(), name="Good")


def test_npattn_check_exits_1_on_a_stale_cache(user_file, capsys):
    assert run_check(f"{user_file}:StaleCache") == 1
    assert "keeps the first forward's cache" in capsys.readouterr().out
    assert run_check(f"{user_file}:Good") == 0
