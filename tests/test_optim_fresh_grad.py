"""A Parameter's .grad starts at zeros (docs/training.md): a step before any backward is a step
with a zero gradient; set_to_none=True makes an optimizer skip the parameter, as PyTorch's does."""

import numpy as np

import npattn
from npattn.optim import SGD, AdamW


def _model():
    return npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)


def test_a_step_before_any_backward_is_a_zero_gradient_step():
    m = _model()
    w = m.W_query.data.copy()
    opt = AdamW(m.parameters(), lr=0.1, weight_decay=0.5)
    opt.step()
    np.testing.assert_allclose(m.W_query.data, w * (1 - 0.1 * 0.5), rtol=0, atol=1e-15)  # decoupled decay only
    assert [s["step"] for s in opt.state.values()] == [1, 1, 1]
    m = _model()
    w = m.W_query.data.copy()
    SGD(m.parameters(), lr=0.1).step()
    np.testing.assert_array_equal(m.W_query.data, w)


def test_set_to_none_skips_the_parameter_like_pytorch():
    m = _model()
    w = m.W_query.data.copy()
    opt = AdamW(m.parameters(), lr=0.1, weight_decay=0.5)
    opt.zero_grad(set_to_none=True)
    opt.step()
    np.testing.assert_array_equal(m.W_query.data, w)
    assert opt.state_dict()["state"] == {}
