"""A weights mapping with a key the debugging tools do not know is refused, naming the closest
expected key: a misspelt "W_query.bais" used to drop the bias and turn a correct output's verdict
wrong, and an extra "W_querry" next to "W_query" used to be ignored. State-dict entries that are not
weights (the causal mask buffer, MultiHeadAttention's out_proj) are still accepted."""

import numpy as np
import pytest

import npattn
from npattn.debug.backward import diagnose_backward
from npattn.debug.compare import compare
from npattn.debug.weights import weights_of
from npattn.errors import ConfigError


def _biased():
    m = npattn.SelfAttention_v2(3, 2, qkv_bias=True, rng=1, dtype=np.float64)
    x = npattn.book_inputs().astype(np.float64)
    return x, dict(npattn.weights_of(m)), m(x)


def test_a_misspelt_bias_key_is_refused_not_dropped():
    x, w, out = _biased()
    assert npattn.diagnose(x, w, out).correct and npattn.check_rows(x, w, out).passed
    w["W_query.bais"] = w.pop("W_query.bias")
    hint = r"weights: unknown key 'W_query.bais' \(did you mean 'W_query.bias'\?\); expected the keys W_query"
    with pytest.raises(ConfigError, match=hint):
        npattn.diagnose(x, w, out)
    with pytest.raises(ConfigError, match=hint):
        npattn.check_rows(x, w, out)


def test_an_extra_misspelt_weight_next_to_the_right_one_is_refused():
    x = npattn.book_inputs().astype(np.float64)
    m = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    w = {**npattn.weights_of(m), "W_querry": np.zeros((3, 2))}
    hint = r"unknown key 'W_querry' \(did you mean 'W_query'\?\)"
    with pytest.raises(ConfigError, match=hint):
        npattn.diagnose(x, w, m(x))
    with pytest.raises(ConfigError, match=hint):
        compare(m, lambda x, Wq, Wk, Wv: x @ Wv, x, weights=w)
    with pytest.raises(ConfigError, match=hint):
        diagnose_backward(x, w, np.ones((6, 2)), {"x": np.zeros((6, 3))})
    with pytest.raises(ConfigError, match=r"unknown key 'bias'; expected the keys W_query, W_key, W_value"):
        weights_of({**npattn.weights_of(m), "bias": np.zeros(2)})


def test_state_dicts_of_the_book_classes_are_still_read():
    causal = npattn.CausalAttention(3, 2, 6, 0.0, rng=1).state_dict()
    assert "mask" in causal and set(weights_of(causal)) == {"W_query", "W_key", "W_value"}
    mha = npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=1)
    W = weights_of(mha.state_dict())
    assert set(W) == {"W_query", "W_key", "W_value"} and W.out_proj is not None
    np.testing.assert_array_equal(W["W_query"], mha.W_query.weight.data.T)


def test_check_backward_refuses_an_extra_misspelt_weight_before_running_user_code():
    import stale_learners as S

    from npattn.debug.backcheck import check_backward
    from npattn.debug.userbackward import object_callables
    from npattn.debug.usercode import book_weights

    calls = []
    forward, backward = object_callables(S.Fresh(3, 2), "Fresh")

    def counted(x, W):
        calls.append(1)
        return forward(x, W)

    w = {**book_weights(), "W_querry": np.zeros((3, 2))}
    with pytest.raises(ConfigError, match=r"unknown key 'W_querry' \(did you mean 'W_query'\?\)"):
        check_backward(counted, backward, npattn.book_inputs(), w, name="Fresh")
    assert calls == []
    assert check_backward(counted, backward, npattn.book_inputs(), book_weights(), name="Fresh")
