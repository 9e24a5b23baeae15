"""What happens between a forward and its backward: a submodule's own later forward is refused (the
backward would mix two forwards), check_rows_of keeps the module's last forward, a submodule of
another dtype is refused, softmax_forward's cache is its own, and the tiled backward does not
overflow exp on finite inputs."""

import numpy as np
import pytest

import npattn
from npattn.errors import BackwardError, DTypeError
from npattn.nn import functional as F

X = np.random.default_rng(0).standard_normal((2, 5, 3))


def _mha(**kwargs):
    return npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1, dtype=np.float64, **kwargs)


def test_a_submodules_later_forward_is_refused_and_a_fresh_forward_works():
    m = _mha()
    out = m(X)
    G = np.random.default_rng(1).standard_normal(out.shape)
    m.out_proj(np.zeros((2, 5, 4)))
    with pytest.raises(BackwardError, match=r"its submodule out_proj \(Linear\) ran a forward of its own after"):
        m.backward(G)
    m(X)
    clean = _mha()
    clean(X)
    np.testing.assert_array_equal(m.backward(G), clean.backward(G))


def test_check_rows_of_keeps_the_last_forward():
    m, clean = _mha(), _mha()
    out = m(X)
    clean(X)
    G = np.random.default_rng(1).standard_normal(out.shape)
    assert npattn.check_rows_of(m, X[:, ::-1].copy()).passed
    np.testing.assert_array_equal(m.backward(G), clean.backward(G))


def test_a_submodule_of_another_dtype_is_refused():
    m = npattn.MultiHeadAttention(3, 4, 6, 0.0, 2, rng=1)
    m.out_proj = npattn.Linear(4, 4, rng=2, dtype=np.float64)
    with pytest.raises(DTypeError, match=r"out_proj.weight has dtype float64, but W_query.weight has float32"):
        m(npattn.book_batch())


def test_softmax_forward_keeps_its_own_cache():
    w, cache = F.softmax_forward(np.random.default_rng(2).standard_normal((3, 3)), 1.0)
    (before,) = F.softmax_backward(np.eye(3), cache)
    before = before.copy()
    w *= 2
    (after,) = F.softmax_backward(np.eye(3), cache)
    np.testing.assert_array_equal(before, after)


def test_the_tiled_backward_does_not_overflow_on_finite_inputs():
    x = np.random.default_rng(1).standard_normal((2, 220, 4)) * 30
    tiled = npattn.MultiHeadAttention(4, 4, 300, 0.0, 2, rng=7, dtype=np.float64, impl="tiled")
    ref = npattn.MultiHeadAttention(4, 4, 300, 0.0, 2, rng=7, dtype=np.float64, impl="reference")
    with np.errstate(over="raise", invalid="raise"):
        out = tiled(x)
        dx = tiled.backward(np.ones_like(out))
    ref(x)
    np.testing.assert_allclose(dx, ref.backward(np.ones_like(out)), rtol=0, atol=1e-10)
