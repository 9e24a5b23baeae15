"""Three stage backwards returned views of the caller's upstream gradient (``bias_backward``,
``merge_heads_backward``, ``concat_backward``): ``dy *= 0.5`` changed G, which a residual branch
still needs. Every stage's gradients are fresh arrays; and ``F.attention_forward`` on float16
inputs runs in float32, as kernels.attention does (its float16 scores overflowed to inf, then NaN)."""

import numpy as np

import npattn
from npattn.nn import functional as F


def test_bias_merge_and_concat_backwards_share_no_memory_with_g():
    _, c = F.bias_forward(np.zeros((2, 3)), np.zeros(3))
    G = np.ones((2, 3))
    for d in F.bias_backward(G, c):
        assert not np.shares_memory(d, G)
    x = np.zeros((1, 2, 3, 4))
    _, c = F.merge_heads_forward(x)
    G = np.ones((1, 3, 8))
    assert not np.shares_memory(F.merge_heads_backward(G, c)[0], G)
    _, c = F.concat_forward([np.zeros((2, 3)), np.zeros((2, 4))])
    G = np.ones((2, 7))
    assert not any(np.shares_memory(d, G) for d in F.concat_backward(G, c))


def test_float16_attention_forward_gives_the_reference_paths_numbers():
    q = np.array([[200, 200, 0], [0, 200, 0]], np.float16)
    k = np.array([[200, 200, 0], [-200, 0, 0]], np.float16)
    v = np.array([[1, 2, 3], [4, 5, 6]], np.float16)
    out, cache = F.attention_forward(q, k, v)
    want, _ = npattn.kernels.attention(q, k, v, impl="reference")
    assert out.dtype == np.float16 and np.isfinite(out).all()
    np.testing.assert_array_equal(out, want)
    grads = F.attention_backward(np.ones((2, 3), np.float16), cache)
    assert all(g.dtype == np.float16 and np.isfinite(g).all() for g in grads)


def test_one_head_or_one_token_gives_no_views_either():
    for shape in ((2, 1, 3, 4), (2, 2, 1, 4)):
        y, c = F.merge_heads_forward(np.zeros(shape))
        G = np.ones(y.shape)
        assert not np.shares_memory(F.merge_heads_backward(G, c)[0], G)
    for x_shape, heads in (((2, 3, 4), 1), ((2, 1, 4), 2)):
        s, c = F.split_heads_forward(np.zeros(x_shape), heads)
        G = np.ones(s.shape)
        assert not np.shares_memory(F.split_heads_backward(G, c)[0], G)
