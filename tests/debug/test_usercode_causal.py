"""npattn check on causal attention classes: the book's constructor (d_in, d_out, context_length, dropout)."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.debug.usercode import check_attention, load_attention

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "broken_attention.py"

CAUSAL_FILE = textwrap.dedent(
    """
    import numpy as np
    import npattn
    from npattn.nn.functional import softmax


    class CausalAttention:
        # the book's listing 3.3 in NumPy: (d_in, d_out) weights, a causal mask of context_length
        def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
            self.W_query = np.zeros((d_in, d_out))
            self.W_key = np.zeros((d_in, d_out))
            self.W_value = np.zeros((d_in, d_out))
            self.mask = np.triu(np.ones((context_length, context_length)), k=1).astype(bool)

        def __call__(self, x):
            b, n, d_in = x.shape
            queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
            attn_scores = queries @ keys.transpose(0, 2, 1)
            attn_scores = np.where(self.mask[:n, :n], -np.inf, attn_scores)
            return softmax(attn_scores / keys.shape[-1] ** 0.5, axis=self.axis) @ values

        axis = -1


    class ForgotTheMask(CausalAttention):
        def __init__(self, d_in, d_out, context_length, dropout):
            super().__init__(d_in, d_out, context_length, dropout)
            self.mask = np.zeros_like(self.mask)


    class WrongAxis(CausalAttention):
        axis = -2


    Library = npattn.CausalAttention
    """
)


@pytest.fixture
def causal_file(tmp_path):
    path = tmp_path / "causal_attention.py"
    path.write_text(CAUSAL_FILE)
    return path


def test_check_a_correct_causal_class(causal_file, capsys):
    assert main(["check", f"{causal_file}:CausalAttention"]) == 0
    out = capsys.readouterr().out
    assert "built as CausalAttention(3, 2, 6, 0.0)) as causal attention on the book's batch (2, 6, 3)" in out
    assert "context_vec  (2, 6, 2)  (2, 6, 2)  ok" in out
    assert "single-token check" in out and "PASSED" in out
    assert "correct: the output equals the reference" in out


def test_check_npattns_own_causal_class(causal_file):
    report = check_attention(f"{causal_file}:Library")
    assert report.causal and report.diagnosis.correct and report.row_check
    expected = npattn.CausalAttention(3, 2, 6, 0.0, rng=0)
    expected.load_state_dict(
        {f"{n}.weight": w.T for n, w in npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=123)).items()}, strict=False
    )
    np.testing.assert_allclose(report.output, expected(npattn.book_batch()), rtol=1e-6)


@pytest.mark.parametrize(
    "name, mistake", [("ForgotTheMask", "missing_causal_mask"), ("WrongAxis", "softmax_wrong_axis")]
)
def test_check_diagnoses_a_causal_class_as_causal(causal_file, name, mistake):
    report = check_attention(f"{causal_file}:{name}")
    assert report.causal and not report
    assert report.diagnosis.matches == (mistake,)
    assert not report.row_check  # the causal single-token computation disagrees too


def test_prepare_reports_the_call_form_and_causality(causal_file):
    user = load_attention(f"{causal_file}:CausalAttention")
    user.prepare(npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=123)))
    assert user.causal and user.built_as == "CausalAttention(3, 2, 6, 0.0)"
    v1 = load_attention(f"{EXAMPLES}:SelfAttentionSwapped")
    v1.prepare(npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=123)))
    assert not v1.causal and v1.built_as == "SelfAttentionSwapped(3, 2)"


@pytest.mark.torch
def test_check_the_books_torch_causal_attention():
    pytest.importorskip("torch")
    book_class = Path(__file__).resolve().parents[1] / "fixtures" / "make_parity_fixtures.py"  # the book's listing 3.3
    report = check_attention(f"{book_class}:CausalAttention")
    assert report.causal and report.diagnosis.correct and report.row_check
