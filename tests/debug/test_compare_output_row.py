"""compare judges what each implementation returns, not only its recorded stages, and refuses a
function whose signature does not take what it is called with."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError


class _ScaledOutput(npattn.SelfAttention_v1):
    """Every stage right; forward scales its result after the last recorded stage."""

    def forward(self, x):
        return super().forward(x) * 1.001


def _pair():
    return npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64), _ScaledOutput(3, 2, rng=123, dtype=np.float64)


def test_an_output_changed_after_the_last_stage_diverges():
    reference, candidate = _pair()
    result = npattn.compare(reference, candidate, npattn.book_inputs())
    assert not result and result.first_divergence == "output"
    assert not result["context_vec"].diverged
    assert result["output"].max_diff == pytest.approx(8.21e-4, rel=1e-2)
    assert "forward changes its result after its last recorded stage" in str(result)


def test_a_module_whose_context_vec_is_its_output_has_no_repeated_row():
    x = npattn.book_inputs()
    result = npattn.compare(npattn.SelfAttention_v1(3, 2, rng=123), npattn.SelfAttention_v1(3, 2, rng=123), x)
    assert result and [s.name for s in result.stages][-1] == "context_vec"
    assert "all compared stages agree" in str(result)
    mha = lambda: npattn.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)  # noqa: E731
    assert "output" not in [s.name for s in npattn.compare(mha(), mha(), npattn.book_batch()).stages]


def test_a_wrong_context_vec_stays_the_first_divergence():
    reference = npattn.SelfAttention_v1(3, 2, rng=123)
    result = npattn.compare(reference, lambda x: reference(x) + 1, npattn.book_inputs())
    assert result.first_divergence == "context_vec"


def test_the_output_against_a_function_of_stages_without_an_output_is_shown():
    reference, candidate = _pair()
    stages = dict(npattn.trace(reference, npattn.book_inputs()).shapes)
    mapping = {name: npattn.trace(reference, npattn.book_inputs())[name] for name in stages}
    result = npattn.compare(lambda x: mapping, candidate, npattn.book_inputs())
    assert "only in candidate" in str(result) and result["output"].reference_shape is None


def test_a_function_of_the_weights_without_weights_is_a_config_error():
    def ref(x, W_query, W_key, W_value):
        return x @ W_value

    model = npattn.SelfAttention_v1(3, 2, rng=123)
    with pytest.raises(ConfigError, match=r"ref\(x, W_query, W_key, W_value\).*needs weights="):
        npattn.compare(model, ref, npattn.book_inputs())
    with pytest.raises(ConfigError, match=r"f\(x, W_query, W_key, W_value\), got <lambda>\(x\).*drop weights="):
        npattn.compare(model, lambda x: x, npattn.book_inputs(), weights=model)


def test_a_type_error_raised_by_the_function_itself_stays_its_own():
    def own(x):
        raise TypeError("my own mistake")

    with pytest.raises(TypeError, match="my own mistake"):
        npattn.compare(npattn.SelfAttention_v1(3, 2, rng=123), own, npattn.book_inputs())
