"""Editing a dropout keep mask between forward and backward cannot change the gradients (the
forward's cache holds its own copy), for kernels.attention, functional.attention_forward and the
dropout stage itself."""

from __future__ import annotations

import numpy as np
import pytest

from npattn import kernels as K
from npattn.nn import functional as F


@pytest.mark.parametrize("pair", ["kernels", "functional"])
def test_attention_backward_uses_the_forwards_keep_mask(pair: str) -> None:
    fwd, bwd = (K.attention, K.attention_backward) if pair == "kernels" else (F.attention_forward, F.attention_backward)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    G = rng.standard_normal((2, 4, 3))
    keep = rng.random((2, 4, 4)) > 0.3
    _, cache = fwd(q, k, v, dropout_keep=keep.copy(), dropout_p=0.3)
    expected = bwd(G, cache)
    _, cache = fwd(q, k, v, dropout_keep=keep, dropout_p=0.3)
    keep[...] = True  # the caller edits its mask after the forward
    for name, got, want in zip(("d_queries", "d_keys", "d_values"), bwd(G, cache), expected):
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_dropout_stage_keeps_its_own_mask() -> None:
    rng = np.random.default_rng(1)
    w, d = rng.random((3, 3)), rng.standard_normal((3, 3))
    keep = np.eye(3, dtype=bool)
    _, cache = F.dropout_forward(w, keep, 0.5)
    keep[...] = True
    (dw,) = F.dropout_backward(d, cache)
    np.testing.assert_array_equal(dw, d * np.eye(3) * 2.0)
