"""``module.forward(x)`` called directly runs as ``module(x)``, as PyTorch gives both the same
gradients: it skipped the parameter checks and the record a backward differentiates (a submodule
used twice through .forward gave wrong gradients without a word; a submodule's .forward between its
parent's forward and backward changed the parent's gradients; a model's .forward then .backward
blamed a submodule the user never ran)."""

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError, ShapeError

X3 = np.random.default_rng(0).standard_normal((2, 6, 3))


class Twice(npattn.Module):
    def __init__(self):
        super().__init__()
        self.l = npattn.Linear(3, 3, rng=1, dtype=np.float64)

    def forward(self, x):
        return self.l.forward(self.l.forward(x))

    def backward(self, g):
        return self.l.backward(self.l.backward(g))


def test_a_submodule_used_twice_through_forward_is_refused_at_backward():
    m = Twice()
    out = m(np.ones((4, 3)))
    with pytest.raises(BackwardError, match="ran more than once in one forward of Twice"):
        m.backward(np.ones_like(out))


def test_a_submodules_forward_between_forward_and_backward_is_refused():
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64)
    m(X3)
    m.out_proj.forward(np.zeros((2, 6, 4)))
    with pytest.raises(BackwardError, match=r"its submodule out_proj .* ran a forward of its own"):
        m.backward(np.ones((2, 6, 4)))


def test_forward_checks_the_parameters_as_a_call_does():
    m = npattn.SelfAttention_v1(3, 2, rng=123)
    m.W_query.data = np.ones((3, 1), np.float32)
    with pytest.raises(ShapeError, match=r"parameter W_query has shape \(3, 1\), expected \(3, 2\)"):
        m.forward(npattn.book_inputs())


GPT = dict(vocab_size=11, context_length=6, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)


@pytest.mark.parametrize("make, x", [
    (lambda: npattn.GPTModel(GPT, rng=1, dtype=np.float64), np.array([[1, 2, 3]])),
    (lambda: npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64), X3),
    (lambda: npattn.Sequential(npattn.Linear(3, 3, rng=1, dtype=np.float64), npattn.GELU()), X3),
])  # fmt: skip
def test_forward_then_backward_gives_the_gradients_of_a_call(make, x):
    direct, called = make(), make()
    out = direct.forward(x)
    np.testing.assert_array_equal(out, called(x))
    G = np.random.default_rng(1).standard_normal(out.shape)
    direct.backward(G)
    called.backward(G)
    for (name, p), q in zip(direct.named_parameters(), called.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=name)


def test_a_subclass_with_a_call_of_its_own_does_not_loop_nor_change_forward():
    class OwnCall(npattn.Linear):
        def __call__(self, x):
            return self.forward(x)

    class Double(npattn.Linear):
        def __call__(self, x):
            return super().__call__(x) * 2

    x = np.ones((1, 3))
    m = OwnCall(3, 2, rng=1, dtype=np.float64)
    np.testing.assert_array_equal(m(x), m.forward(x))
    base = npattn.Linear(3, 2, rng=1, dtype=np.float64)(x)
    np.testing.assert_array_equal(Double(3, 2, rng=1, dtype=np.float64).forward(x), base)


def test_a_named_base_forward_runs_that_forward():
    class Scaled(npattn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    x = np.ones((1, 3))
    m, base = Scaled(3, 2, rng=1, dtype=np.float64), npattn.Linear(3, 2, rng=1, dtype=np.float64)(x)
    np.testing.assert_array_equal(npattn.Linear.forward(m, x), base)
    np.testing.assert_array_equal(super(Scaled, m).forward(x), base)
    np.testing.assert_array_equal(m.forward(x), 2 * base)


def test_a_forward_that_is_no_plain_function_is_left_as_it_is():
    class Static(npattn.Module):
        forward = staticmethod(np.tanh)

    class Ufunc(npattn.Module):
        forward = np.tanh

    x = np.ones((1, 3))
    np.testing.assert_array_equal(Static()(x), np.tanh(x))
    np.testing.assert_array_equal(Ufunc()(x), np.tanh(x))


def test_calls_in_threads_leave_no_module_marked_as_inside_a_call():
    import threading

    from npattn.nn.passes import CALLS

    m, x = npattn.Linear(3, 2, rng=1, dtype=np.float64), np.ones((1, 3))
    threads = [threading.Thread(target=lambda: [m(x) for _ in range(200)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert CALLS.inside == set()
    count = m._forward_count
    m.forward(x)
    assert m._forward_count == count + 1  # still run as a call
