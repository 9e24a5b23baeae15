"""``compare`` of CausalAttention and a one-head MultiHeadAttention (identity out_proj) said they
diverge at attn_scores ("queries and keys agree but the scores do not") although every value is
equal: a stage of shape (b, n, m) against (b, 1, n, m) differs only by the head axis, and is
compared value by value; a real difference is still found."""

import numpy as np

import npattn


def _pair():
    a = npattn.CausalAttention(3, 2, 6, 0.0, rng=1, dtype=np.float64)
    b = npattn.MultiHeadAttention(3, 2, 6, 0.0, 1, rng=1, dtype=np.float64)
    state = dict(a.state_dict(), **{"out_proj.weight": np.eye(2), "out_proj.bias": np.zeros(2)})
    b.load_state_dict(state)
    return a, b


def test_one_heads_stages_compare_value_by_value():
    a, b = _pair()
    found = npattn.compare(a, b, npattn.book_batch().astype(np.float64))
    assert found.first_divergence is None
    assert {s.name: s.max_diff for s in found.stages}["attn_scores"] == 0.0


def test_a_real_difference_is_still_found():
    a, b = _pair()
    b.W_key.weight.data[0, 0] += 1e-3
    assert npattn.compare(a, b, npattn.book_batch().astype(np.float64)).first_divergence == "keys"


def test_shapes_that_differ_otherwise_still_diverge():
    a = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    b = npattn.SelfAttention_v1(3, 3, rng=1, dtype=np.float64)
    assert npattn.compare(a, b, npattn.book_inputs().astype(np.float64)).first_divergence == "queries"
