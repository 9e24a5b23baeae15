"""``compare(module, ...)`` between a module's forward and its backward keeps that forward, as
check_rows_of, gradcheck and diagnose do: the backward gave the gradient of compare's input."""

import numpy as np

import npattn


def _module():
    return npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)


def test_compare_between_forward_and_backward_changes_nothing():
    x = npattn.book_inputs().astype(np.float64)
    G = np.random.default_rng(0).standard_normal((6, 2))
    m = _module()
    m(x)
    reference = m.backward(G).copy()
    grads = {n: p.grad.copy() for n, p in m.named_parameters()}
    m.zero_grad()
    m(x)
    assert npattn.compare(m, _module(), 2 * x).passed
    np.testing.assert_array_equal(m.backward(G), reference)
    for n, p in m.named_parameters():
        np.testing.assert_array_equal(p.grad, grads[n])
