"""SelfAttention_v1's behaviour: shapes, batches, dtypes, backward accumulation and clear errors."""

import numpy as np
import pytest

import npattn


def model64(d_in=3, d_out=2, seed=0):
    return npattn.SelfAttention_v1(d_in, d_out, rng=np.random.default_rng(seed), dtype=np.float64)


def test_shapes_single_and_batch(rng):
    m = model64(4, 5)
    assert m(rng.standard_normal((7, 4))).shape == (7, 5)
    assert m(rng.standard_normal((3, 7, 4))).shape == (3, 7, 5)


def test_batched_equals_loop(rng):
    m = model64(4, 3)
    x = rng.standard_normal((3, 6, 4))
    g = rng.standard_normal((3, 6, 3))
    out = m(x)
    dx = m.backward(g)
    batched_grads = {n: p.grad.copy() for n, p in m.named_parameters()}
    m.zero_grad()
    for i in range(3):
        np.testing.assert_allclose(m(x[i]), out[i], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(m.backward(g[i]), dx[i], rtol=1e-12, atol=1e-14)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(p.grad, batched_grads[n], rtol=1e-12, atol=1e-14)


def test_float32_agrees_with_float64(rng):
    x = rng.standard_normal((2, 9, 5))
    m32 = npattn.SelfAttention_v1(5, 4, rng=7)
    m64 = npattn.SelfAttention_v1(5, 4, rng=7, dtype=np.float64)
    np.testing.assert_array_equal(m32.W_query.data.astype(np.float64), m64.W_query.data)
    out32, out64 = m32(x), m64(x)
    assert out32.dtype == np.float32 and out64.dtype == np.float64
    np.testing.assert_allclose(out32, out64, rtol=1e-5, atol=1e-5)


def test_backward_accumulates_like_pytorch(rng):
    m = model64()
    x = rng.standard_normal((6, 3))
    g = rng.standard_normal((6, 2))
    m(x)
    m.backward(g)
    once = [p.grad.copy() for p in m.parameters()]
    m.backward(g)
    for p, g1 in zip(m.parameters(), once):
        np.testing.assert_allclose(p.grad, 2 * g1)
    m.zero_grad()
    assert not any(p.grad.any() for p in m.parameters())


def test_rows_are_convex_combinations_of_values(rng):
    m = model64(4, 3)
    x = rng.standard_normal((2, 8, 4)) * 3
    out = m(x)
    values = x @ m.W_value.data
    assert np.all(out >= values.min(axis=1, keepdims=True) - 1e-12)
    assert np.all(out <= values.max(axis=1, keepdims=True) + 1e-12)


def test_extreme_scores_stay_finite():
    for dtype in (np.float32, np.float64):
        m = npattn.SelfAttention_v1(2, 2, rng=0, dtype=dtype)
        m.W_query.data[...] = [[100.0, 0], [0, 100.0]]
        m.W_key.data[...] = [[100.0, 0], [0, 100.0]]
        x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5]], dtype=dtype)  # scaled scores ~ 7e3
        out = m(x)
        assert np.all(np.isfinite(out))
        assert np.all(np.isfinite(m.backward(np.ones_like(out))))
        assert all(np.all(np.isfinite(p.grad)) for p in m.parameters())


def test_empty_sequence_works():
    m = model64()
    out = m(np.zeros((0, 3)))
    assert out.shape == (0, 2)
    assert m.backward(np.zeros((0, 2))).shape == (0, 3)


def test_lists_are_accepted_and_converted():
    m = npattn.SelfAttention_v1(3, 2, rng=123)
    np.testing.assert_array_equal(m(npattn.book_inputs().tolist()), m(npattn.book_inputs()))


@pytest.mark.parametrize(
    "x,error,pattern",
    [
        (np.zeros((6, 4)), npattn.ShapeError, r"expected last dimension d_in=3, got shape \(6, 4\)"),
        (np.zeros(3), npattn.ShapeError, r"got a 1-D array of shape \(3,\)"),
        (np.zeros((1, 2, 6, 3)), npattn.ShapeError, "got a 4-D array"),
        (np.zeros((6, 3), dtype=complex), npattn.DTypeError, "complex"),
        (np.array([[1, "a", 3]], dtype=object), npattn.DTypeError, "object"),
        ([[1.0, 2.0, 3.0], [1.0, 2.0]], npattn.ShapeError, "ragged"),
    ],
)
def test_bad_inputs_raise_clear_errors(x, error, pattern):
    with pytest.raises(error, match=pattern):
        npattn.SelfAttention_v1(3, 2, rng=0)(x)


def test_backward_errors():
    m = npattn.SelfAttention_v1(3, 2, rng=0)
    with pytest.raises(npattn.BackwardError, match="before forward"):
        m.backward(np.zeros((6, 2)))
    m(np.zeros((6, 3)))
    with pytest.raises(npattn.ShapeError, match=r"expected shape \(6, 2\).*got \(5, 2\)"):
        m.backward(np.zeros((5, 2)))


@pytest.mark.parametrize("args", [(0, 2), (3, -1), (3.0, 2), (True, 2), ("3", 2)])
def test_constructor_errors(args):
    with pytest.raises(npattn.ConfigError):
        npattn.SelfAttention_v1(*args)


def test_repr_and_state_dict_keys():
    m = npattn.SelfAttention_v1(3, 2, rng=123)
    assert list(m.state_dict()) == ["W_query", "W_key", "W_value"]
    assert repr(m).startswith("SelfAttention_v1(d_in=3, d_out=2")
    assert "(W_key): Parameter(shape=(3, 2), dtype=float32)" in repr(m)


def test_state_dict_round_trip_reproduces_output():
    a = npattn.SelfAttention_v1(3, 2, rng=123)
    b = npattn.SelfAttention_v1(3, 2, rng=5)
    b.load_state_dict(a.state_dict())
    x = npattn.book_inputs()
    np.testing.assert_array_equal(a(x), b(x))
