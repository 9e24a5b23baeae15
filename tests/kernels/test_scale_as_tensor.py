"""``attention(scale=...)`` given the book's scale as a 0-d array, NumPy scalar or 0-d tensor (as a
PyTorch user passes ``scale=torch.tensor(0.5)``) was refused with a message naming that same 0.5 as
the scale npattn uses; it is the book's scale and runs. Other scales are still refused."""

import numpy as np
import pytest

from npattn import kernels
from npattn.errors import ConfigError

Q = np.random.default_rng(0).standard_normal((5, 4))


@pytest.mark.parametrize("scale", [0.5, np.float32(0.5), np.array(0.5), np.float64(0.5)], ids=repr)
def test_the_books_scale_in_any_numeric_form_runs(scale):
    want, _ = kernels.attention(Q, Q, Q)
    got, _ = kernels.attention(Q, Q, Q, scale=scale)
    np.testing.assert_array_equal(got, want)


def test_a_torch_scalar_scale_runs():
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(kernels.attention(Q, Q, Q, scale=torch.tensor(0.5))[0], kernels.attention(Q, Q, Q)[0])


@pytest.mark.parametrize("scale", [np.array(0.25), np.array([0.5]), "0.5", True], ids=repr)
def test_other_scales_are_refused(scale):
    with pytest.raises(ConfigError, match=r"is not supported: npattn scales the scores by 1/sqrt\(k\) = 0\.5"):
        kernels.attention(Q, Q, Q, scale=scale)


@pytest.mark.parametrize("k", [3, 5, 7, 64])
def test_the_books_scale_rounded_to_float32_or_float16_runs(k):
    q = np.random.default_rng(1).standard_normal((4, k))
    want, _ = kernels.attention(q, q, q)
    for dtype in (np.float32, np.float16):
        got, _ = kernels.attention(q, q, q, scale=dtype(1 / np.sqrt(k)))
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ConfigError, match="is not supported"):
        kernels.attention(q, q, q, scale=np.float32(1 / np.sqrt(k)) * np.float32(1.001))


def test_a_torch_float32_scale_of_an_odd_head_size_runs():
    torch = pytest.importorskip("torch")
    q = np.random.default_rng(2).standard_normal((4, 3))
    got, _ = kernels.attention(q, q, q, scale=torch.tensor(1 / np.sqrt(3)))
    np.testing.assert_array_equal(got, kernels.attention(q, q, q)[0])


@pytest.mark.parametrize(("causal", "is_causal"), [(False, True), (True, False), (True, True), (False, False)])
def test_causal_and_is_causal_together_are_refused_whatever_their_values(causal, is_causal):
    """``causal=False`` with ``is_causal=True`` ran causal: an explicit causal=False was taken for unset."""
    with pytest.raises(ConfigError, match="give causal= or PyTorch's is_causal=, not both"):
        kernels.attention(Q, Q, Q, causal=causal, is_causal=is_causal)


def test_is_causal_alone_and_causal_alone_still_work():
    want, _ = kernels.attention(Q, Q, Q, causal=True)
    np.testing.assert_array_equal(kernels.attention(Q, Q, Q, is_causal=True)[0], want)
    np.testing.assert_array_equal(kernels.attention(Q, Q, Q)[0], kernels.attention(Q, Q, Q, causal=False)[0])


def test_only_the_books_scale_rounded_is_accepted_not_its_neighbours():
    """One epsilon of tolerance let the next float16 after 0.5 (0.5005) stand for the book's 0.5."""
    q = np.random.default_rng(3).standard_normal((4, 4))
    for neighbour in (np.nextafter(np.float16(0.5), np.float16(1)), np.nextafter(np.float32(0.5), np.float32(1))):
        with pytest.raises(ConfigError, match="is not supported"):
            kernels.attention(q, q, q, scale=neighbour)


def test_a_bfloat16_tensor_of_the_books_scale_runs():
    torch = pytest.importorskip("torch")
    q = np.random.default_rng(2).standard_normal((4, 3))
    got, _ = kernels.attention(q, q, q, scale=torch.tensor(1 / np.sqrt(3), dtype=torch.bfloat16))
    np.testing.assert_array_equal(got, kernels.attention(q, q, q)[0])


@pytest.mark.parametrize("k", [3, 5, 7, 96])
@pytest.mark.parametrize("narrow", [np.float32, np.float16])
def test_the_books_scale_computed_in_a_narrower_float_is_accepted(k, narrow):
    """1 / sqrt(k) computed in float32 or float16 rounds twice (an ulp off its rounding for k=7, 96)."""
    from npattn.kernels import attention

    q = np.random.default_rng(k).standard_normal((4, k))
    scale = float(narrow(1) / np.sqrt(narrow(k)))
    out, _ = attention(q, q, q, scale=scale)
    np.testing.assert_array_equal(out, attention(q, q, q)[0])


def test_a_refused_scale_names_the_books_in_full():
    from npattn.kernels import attention

    q = np.ones((4, 7))
    with pytest.raises(ConfigError, match=r"1/sqrt\(k\) = 0\.3779644730092272 \(the book's\)"):
        attention(q, q, q, scale=0.3779645)


@pytest.mark.parametrize("k", [11, 19, 29, 34, 44])
def test_the_books_scale_computed_in_bfloat16_is_accepted(k):
    torch = pytest.importorskip("torch")
    q = np.random.default_rng(k).standard_normal((4, k))
    scale = torch.tensor(float(k), dtype=torch.bfloat16).rsqrt()  # an ulp off the rounded 1/sqrt(k) here
    np.testing.assert_array_equal(kernels.attention(q, q, q, scale=scale)[0], kernels.attention(q, q, q)[0])
    with pytest.raises(ConfigError, match="is not supported"):  # 0.5 is exact: its neighbour is another scale
        kernels.attention(q[:, :4], q[:, :4], q[:, :4], scale=torch.tensor(0.50390625, dtype=torch.bfloat16))
