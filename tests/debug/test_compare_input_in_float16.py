"""``compare`` of a float32 and a float16 module with the same weights: the float16 one rounds x, and
the first divergence at x was explained as "the two implementations were not given the same input";
it now names the narrower dtype as the other cause."""

import numpy as np

import npattn


def test_a_float16_module_is_named_as_the_cause_at_x():
    a = npattn.SelfAttention_v1(3, 2, rng=1)
    b = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float16)
    b.load_state_dict(a.state_dict())
    result = npattn.compare(a, b, npattn.book_inputs())
    assert result.first_divergence == "x"
    assert "or one holds a narrower dtype (float16) and rounded x to it" in str(result)
