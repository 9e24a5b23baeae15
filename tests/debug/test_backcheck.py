"""npattn check on a hand-written backward: every catalogued mistake, planted in independent
learner code (tests/learners.py, both code shapes, single- and multi-head), is named exactly;
correct code gets nothing; NaN, wrong shapes and exceptions are reported without a traceback."""

from pathlib import Path

import learners
import numpy as np
import pytest

import npattn
from npattn.cli import main
from npattn.debug.backcheck import recover_keep
from npattn.debug.backward import BACKWARD_CATALOGUE, backward_variant
from npattn.debug.usercode import attention_from_module, check_attention, multihead_weights

LEARNERS = Path(learners.__file__)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "broken_backward.py"


def check(name):
    return check_attention(attention_from_module(learners, name))


def cases():
    """(name, expected identifiers) for every learner: correct ones expect ()."""
    out = [(f"{base}", ()) for base in ("attention", "Attention", "AttentionAttributes", "AttentionParameters")]
    out += [(base, ()) for base in ("Causal", "CausalRenormalised", "MultiHead")]
    for bug in learners.BUGS:
        out += [(f"{bug}", (bug,)), (f"Attention_{bug}", (bug,)), (f"AttentionAttributes_{bug}", (bug,))]
        out += [(f"AttentionParameters_{bug}", (bug,)), (f"Causal_{bug}", (bug,)), (f"MultiHead_{bug}", (bug,))]
        # section 3.5.1's form needs no rowsum term in the softmax backward: the renormalisation supplies it
        out += [(f"CausalRenormalised_{bug}", () if bug == "softmax_backward_no_rowsum" else (bug,))]
    out += [("CausalRenormalised_mask_backward_not_zeroed", ("mask_backward_not_zeroed",))]
    out += [(f"MultiHead_{bug}", (bug,)) for bug in learners.MULTIHEAD_BUGS]
    return out


# dS = scale * dA, not zeroed at masked positions, carries the dropout draws at positions the forward
# never reads (so no output tells them): named by the check without dropout only.
HIDDEN_BY_DROPOUT = (
    "Causal_softmax_backward_identity",
    "MultiHead_softmax_backward_identity",
    "CausalRenormalised_mask_backward_not_zeroed",
)
DROPOUT_ONLY = (
    "Causal_dropout_backward_scale",
    "CausalRenormalised_dropout_backward_scale",
    "MultiHead_dropout_backward_scale",
)


@pytest.mark.parametrize(("name", "expected"), cases(), ids=[c[0] for c in cases()])
def test_every_planted_backward_mistake_is_named_exactly(name, expected):
    report = check(name)
    assert report.diagnosis.correct  # the forward is right in every learner
    assert report.backward.diagnosis.identifiers == expected
    assert report.backward.passed is (expected == ())
    assert bool(report) is (expected == ())
    if report.dropout is not None and name in HIDDEN_BY_DROPOUT:
        assert not report.dropout.passed and report.dropout.diagnosis.identifiers == ()
    elif report.dropout is not None:  # the causal classes, checked again with dropout
        assert report.dropout.diagnosis.identifiers == expected
    elif report.causal:
        raise AssertionError(f"{name}: the dropout check did not run: {report.dropout_note}")


@pytest.mark.parametrize("name", DROPOUT_ONLY)
def test_the_dropout_scale_shows_only_with_dropout(name):
    report = check(name)
    assert report.backward.passed and report.backward.diagnosis.correct
    assert report.dropout.diagnosis.identifiers == ("dropout_backward_scale",)
    assert not report


def test_the_report_answers_float_noise_or_bug(capsys):
    assert main(["check", f"{LEARNERS}:attention"]) == 0
    out = capsys.readouterr().out
    assert "backward: PASSED" in out and "correct: every gradient equals npattn's" in out
    assert "attention: PASSED: the forward and the backward are right" in out
    assert main(["check", f"{LEARNERS}:softmax_backward_diagonal"]) == 1
    out = capsys.readouterr().out
    assert "dW_query  (3, 2)  finite differences" in out and "npattn's gradient" in out
    assert "x over  FAIL" in out and "softmax_backward_diagonal: softmax backward dS = scale * A * (1 - A) * dA" in out


def test_wrong_outside_the_catalogue_names_the_first_wrong_tensor():
    report = check("unknown")
    assert not report and report.backward.diagnosis.identifiers == ()
    assert "wrong, no catalogued mistake reproduces it (10 tried); the first wrong tensor: dW_key" in str(report)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nan", "dW_query  (3, 2)  NaN/inf in 6 of 6"),
        ("wrong_shape", "dW_query  (3, 2)  shape (2, 3)"),
        ("raises", "raises's backward raised IndexError: tuple index out of range (at "),
    ],
)
def test_broken_backwards_are_reported_without_a_traceback(name, message, capsys):
    assert main(["check", f"{LEARNERS}:{name}"]) == 1
    captured = capsys.readouterr()
    assert message in captured.out and "Traceback" not in captured.out + captured.err


def test_user_code_gets_copies_of_the_weights(tmp_path):
    path = tmp_path / "editing.py"
    path.write_text(
        "from learners import forward, backward\n"
        "def editing_forward(x, W_query, W_key, W_value):\n"
        "    out, cache = forward(x, W_query, W_key, W_value)\n"
        "    W_query *= 2.0; x[...] = 0.0\n"  # vandalise the arrays it was given
        "    return out, cache\n"
        "def editing_backward(d_out, cache):\n"
        "    return backward(d_out, cache)\n"
    )
    import sys

    sys.path.insert(0, str(LEARNERS.parent))
    try:
        report = check_attention(f"{path}:editing")
    finally:
        sys.path.remove(str(LEARNERS.parent))
    assert report.diagnosis.correct  # the reference was computed from npattn's own arrays


def test_npattns_own_classes_pass(tmp_path):
    path = tmp_path / "library.py"
    path.write_text("import npattn\nCausal = npattn.CausalAttention\nSelf = npattn.SelfAttention_v1\n")
    for name in ("Causal", "Self"):
        report = check_attention(f"{path}:{name}")
        assert report and report.backward.passed, str(report)
    assert "dropout: not checked" in report_note(path)


def report_note(path):
    return check_attention(f"{path}:Causal").dropout_note


def test_every_catalogued_variant_is_visible_on_the_check_inputs():
    """No mistake gives the correct gradients on the inputs npattn check uses (else it could not be named)."""
    x, W = npattn.book_batch().astype(float), multihead_weights()
    G = np.random.default_rng(0).standard_normal((2, 6, 4))
    keep = np.random.default_rng(1).random((2, 2, 6, 6)) >= 0.2
    right = backward_variant(x, W, G, causal=True, num_heads=2, keep=keep, p=0.2)
    for mistake in BACKWARD_CATALOGUE:
        for _, options in mistake.variants:
            wrong = backward_variant(x, W, G, causal=True, num_heads=2, keep=keep, p=0.2, **options)
            assert any(not np.allclose(wrong[n], right[n]) for n in right), mistake.identifier


def test_recover_keep_reads_the_mask_back():
    x, W = npattn.book_batch().astype(float), multihead_weights()
    np.random.seed(3)
    out, cache = learners.forward(x, *W.values(), causal=True, dropout=0.2, num_heads=2)
    keep = recover_keep(out, x, W, 0.2, num_heads=2)
    seen = np.tril(np.ones((6, 6), dtype=bool))
    assert np.array_equal(keep & seen, cache.keep & seen)
    assert recover_keep(out * 1.01, x, W, 0.2, num_heads=2) is None


def test_the_backward_example_script(capsys):
    import runpy

    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "attention      backward ok     -> correct" in out
    for name, identifier in [
        ("no_rowsum", "softmax_backward_no_rowsum"),
        ("diagonal", "softmax_backward_diagonal"),
        ("no_transpose", "scores_backward_no_transpose"),
        ("missing_path", "dx_missing_path"),
        ("SelfAttention", "softmax_backward_missing_scale"),
    ]:
        assert f"{name:<14} backward WRONG  -> {identifier}" in out
