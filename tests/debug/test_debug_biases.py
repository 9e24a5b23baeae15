"""The debugging tools include the biases of qkv_bias=True (check_rows_of, check_rows, diagnose,
weights_of), and the ones that hand user code the three matrices only refuse nonzero biases."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.debug.backward import diagnose_backward
from npattn.debug.diagnose import attention_variant
from npattn.debug.usercode import attention_from_module, check_attention

BIASED = [
    lambda: npattn.SelfAttention_v2(3, 2, qkv_bias=True, rng=1, dtype=np.float64),
    lambda: npattn.CausalAttention(3, 2, 6, 0.0, qkv_bias=True, rng=1, dtype=np.float64),
    lambda: npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, qkv_bias=True, rng=1, dtype=np.float64),
    lambda: npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, qkv_bias=True, rng=1, dtype=np.float64),
]


@pytest.mark.parametrize("build", BIASED, ids=["v2", "causal", "wrapper", "multihead"])
def test_check_rows_of_passes_npattn_own_biased_modules(build):
    module = build()
    x = npattn.book_inputs() if isinstance(module, npattn.SelfAttention_v2) else npattn.book_batch()
    check = npattn.check_rows_of(module, x)
    assert check.passed, str(check)
    assert check.max_diff < 1e-12


def test_check_rows_fails_a_module_that_forgets_its_biases():
    module = BIASED[1]()
    x = npattn.book_batch()
    W = npattn.weights_of(module)
    without = attention_variant(x, *(W[n] for n in ("W_query", "W_key", "W_value")), causal=True)
    assert not npattn.check_rows(x, module, without, causal=True)


def test_weights_of_returns_the_biases_under_state_dict_names():
    module = BIASED[0]()
    W = npattn.weights_of(module)
    assert set(W) == {"W_query", "W_key", "W_value", "W_query.bias", "W_key.bias", "W_value.bias"}
    np.testing.assert_array_equal(W["W_key.bias"], module.W_key.bias.data)
    W_sd = npattn.weights_of(module.state_dict())
    assert all(np.array_equal(W[k], W_sd[k]) for k in W)
    assert set(npattn.weights_of(npattn.SelfAttention_v2(3, 2, rng=1))) == {"W_query", "W_key", "W_value"}


@pytest.mark.parametrize("causal", [False, True])
def test_diagnose_judges_biased_outputs_and_finds_mistakes_with_biases(causal):
    module = (BIASED[1] if causal else BIASED[0])()
    x = npattn.book_batch() if causal else npattn.book_inputs()
    W = npattn.weights_of(module)
    report = npattn.diagnose(x, W, module(x), causal=causal)
    assert report.correct and not report.symptoms, str(report)
    Ws = [W[n] for n in ("W_query", "W_key", "W_value")]
    biases = [W[f"{n}.bias"] for n in ("W_query", "W_key", "W_value")]
    wrong = attention_variant(x, *Ws, causal=causal, scale="1", biases=biases)
    assert npattn.diagnose(x, module, wrong, causal=causal).matches == ("missing_scale",)


def test_tools_without_biases_refuse_nonzero_ones_and_take_zero_ones():
    module = BIASED[0]()
    x = npattn.book_inputs()
    with pytest.raises(npattn.ConfigError, match=r"nonzero biases \(W_query.bias, W_key.bias, W_value.bias\)"):
        diagnose_backward(x, module, np.ones((6, 2)), {})
    with pytest.raises(npattn.ConfigError, match="nonzero biases"):
        npattn.compare(lambda x, Wq, Wk, Wv: x @ Wv, lambda x, Wq, Wk, Wv: x @ Wv, x, weights=npattn.weights_of(module))
    import learners

    with pytest.raises(npattn.ConfigError, match="nonzero biases"):
        check_attention(attention_from_module(learners, "attention"), weights=module.state_dict())
    zero = {**npattn.weights_of(module), **{f"{n}.bias": np.zeros(2) for n in ("W_query", "W_key", "W_value")}}
    assert check_attention(attention_from_module(learners, "attention"), weights=zero).passed
