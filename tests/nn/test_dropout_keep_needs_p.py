"""A keep mask that drops weights needs a dropout rate p > 0: with p = 0 nothing is rescaled, so
the mask would zero weights without inverted dropout's 1 / (1 - p) (it used to, silently)."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn import kernels
from npattn.nn import functional as F

Q = np.random.default_rng(0).standard_normal((5, 4))
KEEP = np.random.default_rng(1).random((5, 5)) > 0.4


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
def test_kernels_refuse_a_keep_mask_with_p_zero(impl: str) -> None:
    with pytest.raises(npattn.ConfigError, match=r"dropout_keep drops 9 of 25 weights but dropout_p=0\.0"):
        kernels.attention(Q, Q, Q, dropout_keep=KEEP, impl=impl)


def test_the_stages_and_the_module_refuse_it_too() -> None:
    with pytest.raises(npattn.ConfigError, match="attention_forward: dropout_keep drops"):
        F.attention_forward(Q, Q, Q, dropout_keep=KEEP)
    with pytest.raises(npattn.ConfigError, match="dropout_forward: keep drops 9 of 25"):
        F.dropout_forward(np.ones((5, 5)), KEEP, 0.0)
    dropout = npattn.Dropout(0.0)
    dropout.fixed_keep = KEEP
    with pytest.raises(npattn.ConfigError, match=r"Dropout\.fixed_keep drops"):
        dropout(np.ones((5, 5)))
    attention = npattn.CausalAttention(4, 3, 5, 0.0, rng=0)
    attention.dropout.fixed_keep = KEEP
    with pytest.raises(npattn.ConfigError, match=r"Dropout\.fixed_keep drops"):
        attention(Q[None])


def test_an_all_true_mask_with_p_zero_and_eval_mode_are_the_identity() -> None:
    plain, _ = kernels.attention(Q, Q, Q)
    np.testing.assert_array_equal(kernels.attention(Q, Q, Q, dropout_keep=np.ones((5, 5), bool))[0], plain)
    dropout = npattn.Dropout(0.0)
    dropout.fixed_keep = KEEP
    dropout.eval()
    np.testing.assert_array_equal(dropout(np.ones((5, 5))), np.ones((5, 5)))
    dropout.train()
    dropout.p = 0.3  # the same mask with its rate: inverted dropout
    np.testing.assert_allclose(dropout(np.ones((5, 5))), KEEP / 0.7)
