"""``kernels.attention`` takes PyTorch's ``scaled_dot_product_attention`` names where they mean
what npattn does: ``is_causal`` is ``causal``, ``scale`` at the book's 1/sqrt(k); ``attn_mask``
(True = attend, the opposite of npattn's ``mask``) and another scale are ConfigErrors saying what
to pass (each was Python's TypeError)."""

import math

import numpy as np
import pytest

from npattn import kernels
from npattn.errors import ConfigError

RNG = np.random.default_rng(0)
Q, K, V = (RNG.standard_normal((2, 5, 4)) for _ in range(3))


def test_is_causal_is_causal():
    causal = kernels.attention(Q, K, V, causal=True)[0]
    np.testing.assert_array_equal(kernels.attention(Q, K, V, is_causal=True)[0], causal)
    np.testing.assert_array_equal(kernels.attention(Q, K, V, is_causal=False)[0], kernels.attention(Q, K, V)[0])


def test_the_books_scale_is_accepted():
    np.testing.assert_array_equal(kernels.attention(Q, K, V, scale=1 / math.sqrt(4))[0], kernels.attention(Q, K, V)[0])


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"scale": 0.3}, r"scale=0.3 is not supported: npattn scales the scores by 1/sqrt\(k\) = 0.5"),
        ({"scale": float("nan")}, r"scale=nan is not supported"),
        ({"attn_mask": np.ones((5, 5), bool)}, r"attn_mask is PyTorch's mask, whose True means 'attend'"),
        ({"is_causal": True, "causal": True}, r"give causal= or PyTorch's is_causal=, not both"),
        ({"is_causal": "yes"}, r"is_causal must be True or False"),
    ],
)
def test_what_npattn_cannot_honour_is_named(keywords, message):
    with pytest.raises(ConfigError, match=message):
        kernels.attention(Q, K, V, **keywords)


def test_matches_torch_with_is_causal():
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (Q, K, V)), is_causal=True).numpy()
    np.testing.assert_allclose(kernels.attention(Q, K, V, is_causal=True)[0], want, rtol=0, atol=1e-14)
