"""``check_shapes`` against a Trace compared only the stages both had: a causal model's
``masked_scores`` was left out of a kind='self' prediction's check ("all 7 recorded stages match"
of 8), and a kind='causal' prediction passed a model that applies no mask (the missing_causal_mask
mistake). A Trace that records stages must have the prediction's, and no other attention stage;
a user's own extra stage, and a module that records none, are compared as before."""

import npattn

XB = npattn.book_batch()


def check(kind, model, x=XB, **kw):
    batch = 2 if x is XB else None
    return npattn.check_shapes(npattn.predict_shapes(6, 3, 2, batch=batch, kind=kind, **kw), npattn.trace(model, x))


def test_a_masked_model_against_a_self_prediction_fails_naming_the_stage():
    result = check("self", npattn.CausalAttention(3, 2, 6, 0.0, rng=1))
    assert not result.passed
    assert "the model computed masked_scores, which the prediction (kind='self') does not have" in str(result)


def test_a_causal_prediction_fails_a_model_without_the_mask():
    result = check("causal", npattn.SelfAttention_v1(3, 2, rng=1), npattn.book_inputs())
    assert not result.passed and "not recorded, so not compared" not in str(result)
    assert "has masked_scores, which the model did not compute: it applies no causal mask" in str(result)


def test_dropout_in_training_mode_needs_dropout_in_the_prediction():
    model = npattn.CausalAttention(3, 2, 6, 0.5, rng=1)
    assert not check("causal", model).passed
    assert check("causal", model, dropout=True).passed
    assert check("causal", model.eval()).passed


def test_multihead_against_the_wrapper_fails():
    wrapper = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1)
    result = check("multihead", wrapper, num_heads=2)
    assert not result.passed and "has merged_heads, which the model did not compute" in str(result)
    assert check("wrapper", wrapper, num_heads=2).passed


def test_matching_kinds_still_pass():
    assert check("self", npattn.SelfAttention_v1(3, 2, rng=1), npattn.book_inputs()).passed
    assert check("causal", npattn.CausalAttention(3, 2, 6, 0.0, rng=1)).passed
    assert check("multihead", npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, rng=1), num_heads=2).passed


def test_a_trace_without_stages_is_compared_on_its_output():
    out = npattn.SelfAttention_v1(3, 2, rng=1)(npattn.book_inputs())
    assert npattn.check_shapes(npattn.predict_shapes(6, 3, 2, kind="causal"), out).passed


def test_the_wrapper_with_another_head_count_is_one_line_naming_num_heads():
    wrapper = npattn.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2, rng=1)
    for heads in (1, 3):
        result = check("wrapper", wrapper, num_heads=heads)
        assert not result.passed
        assert result.other_stages == [
            f"the model has 2 heads (heads.0 to heads.1), the prediction {heads}: predict with num_heads=2"
        ]
