"""npattn check against hostile user code (tests/hostile_learners.py): whatever a forward or a
backward returns gives a report row, never a traceback or a silent conversion; non-finite values
never pass; every section counts in the verdict; misuse gets a clear npattn error."""

import sys
from pathlib import Path

import hostile_learners as H
import learners
import numpy as np
import pytest

import npattn
from npattn.cli import main
from npattn.debug.backward import diagnose_backward
from npattn.debug.diagnose import attention_variant
from npattn.debug.usercode import attention_from_module, book_weights, check_attention
from npattn.debug.weights import gradient_array
from npattn.errors import ConfigError, DTypeError, ShapeError

HOSTILE = Path(H.__file__)


def check(name, **kwargs):
    return check_attention(attention_from_module(H, name), **kwargs)


def test_a_class_with_forward_and_no_call_is_checked():
    report = check("ForwardOnly")
    assert report and report.backward.passed
    instance = H.ForwardOnly(3, 2)  # an instance too
    module = type(sys)("instances")
    module.mine = instance
    assert check_attention(attention_from_module(module, "mine")).passed


def test_an_object_that_cannot_run_is_refused_clearly():
    class Nothing:
        def __init__(self, d_in, d_out):
            self.W_query = self.W_key = self.W_value = np.zeros((d_in, d_out))

    module = type(sys)("nothing")
    module.Nothing = Nothing
    with pytest.raises(ConfigError, match="no forward"):
        check_attention(attention_from_module(module, "Nothing"))


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("complex", "complex (complex128)"),
        ("strings", "strings (<U"),
        ("letters", "strings (<U1)"),
        ("raising_array", "not an array (_RaisingArray: RuntimeError: no array for you)"),
        ("ragged", "not an array (list: ValueError"),
        ("objects", "not a numeric array (array of dtype object)"),
        ("booleans", "booleans (bool)"),
    ],
)
def test_any_returned_gradient_is_a_report_row_never_converted(name, problem, capsys):
    assert main(["check", f"{HOSTILE}:{name}"]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    report = check(name)
    bad = [r for r in report.backward.rows if r.problem]
    assert bad and all(problem in r.problem for r in bad), [r.problem for r in bad]
    assert problem in report.backward.verdict() and not report.backward.diagnosis.correct
    assert f"{name}: FAILED: the forward is right, the backward is wrong" in str(report)


def test_lists_of_numbers_are_fine():
    assert check("lists").passed


def test_gradient_array_lets_keyboard_interrupt_through():
    class Interrupting:
        def __array__(self, *args, **kwargs):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gradient_array(Interrupting(), (2,))
    assert gradient_array(np.ones(2, dtype=np.int64), (2,))[0].dtype == np.float64


def test_diagnose_backward_names_non_real_gradients():
    x, W = npattn.book_inputs(), book_weights()
    G = np.random.default_rng(0).standard_normal((6, 2))
    right = dict(zip(("x", "W_query", "W_key", "W_value"), learners.backward(G, learners.forward(x, *W.values())[1])))
    assert diagnose_backward(x, W, G, right).correct
    for bad in (right["W_key"] + 1j, right["W_key"].astype(str), "abc"):
        diagnosis = diagnose_backward(x, W, G, {**right, "W_key": bad})
        assert not diagnosis.correct and any(p.startswith("dW_key is ") for p in diagnosis.problems)


@pytest.mark.parametrize(
    ("call", "error", "fragment"),
    [
        (lambda x, W, G, g: diagnose_backward(x, W, G, tuple(g.values())), ConfigError, "expected a mapping"),
        (lambda x, W, G, g: diagnose_backward(x, W, G, None), ConfigError, "got NoneType"),
        (lambda x, W, G, g: diagnose_backward(x, {"W_query": W["W_query"]}, G, g), ConfigError, "no W_key, W_value"),
        (lambda x, W, G, g: diagnose_backward(x, W, G[:, :1], g), ShapeError, "shape (6, 2), got shape (6, 1)"),
        (lambda x, W, G, g: diagnose_backward(x * np.nan, W, G, g), ConfigError, "x holds NaN or inf"),
    ],
)
def test_diagnose_backward_misuse_is_a_clear_error(call, error, fragment):
    x, W = npattn.book_inputs(), book_weights()
    G = np.ones((6, 2))
    with pytest.raises(error) as caught:
        call(x, W, G, {"x": x, **W})
    assert fragment in str(caught.value)


def test_non_finite_outputs_never_pass():
    x, W = npattn.book_inputs(), book_weights()
    rows = npattn.check_rows(x, W, np.full((6, 2), np.nan))
    assert not rows.passed and "non-finite" in str(rows)
    partly = attention_variant(x, *W.values())
    partly[2, 1] = np.inf
    assert not npattn.check_rows(x, W, partly).passed
    diagnosis = npattn.diagnose(x, W, np.full((6, 2), np.nan))
    assert not diagnosis.correct and "non-finite" in str(diagnosis)
    report = check("nan_output")
    assert not report and "the forward is wrong" in report.verdict()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_inputs_are_refused(bad):
    x, W = npattn.book_inputs(), book_weights()
    x_bad = x.copy()
    x_bad[0, 0] = bad
    bad_weights = {**W, "W_value": W["W_value"] * bad}
    for call in (
        lambda: npattn.check_rows(x_bad, W, np.zeros((6, 2))),
        lambda: npattn.diagnose(x_bad, W, np.full((6, 2), np.nan)),
        lambda: check_attention(attention_from_module(learners, "attention"), x=x_bad),
        lambda: npattn.diagnose(x, {**W, "W_key": W["W_key"] * bad}, np.zeros((6, 2))),
        lambda: check_attention(attention_from_module(learners, "Attention"), weights=bad_weights),
    ):
        with pytest.raises(ConfigError, match="NaN or inf"):
            call()


def test_name_and_pair_in_one_file_checks_the_pair(capsys):
    assert main(["check", f"{HOSTILE}:both"]) == 1  # the pair's backward is wrong: never exit 0
    out = capsys.readouterr().out
    assert "defines both as well as both_forward and both_backward; the pair is checked" in out
    assert "grad_doubled" in out


def test_a_float32_forward_does_not_make_a_right_backward_wrong():
    for name in ("float32", "float32_inside"):
        report = check(name)
        assert report.passed and report.backward.judge == "npattn's gradient", str(report)
        assert "npattn's analytical gradient (float64) is the judge" in str(report)
        assert all(r.judged_by_differences is False for r in report.backward.rows)
        assert "(not used)" in str(report.backward)
    assert "your forward returns float32" in str(check("float32"))
    assert "your forward loses precision" in str(check("float32_inside"))
    wrong = check("float32_wrong")
    assert not wrong and wrong.backward.diagnosis.identifiers == ("grad_doubled",)


def test_a_small_float64_bug_is_not_excused_as_precision():
    report = check("subtle")
    assert not report and report.backward.judge == "finite differences"
    assert not report.backward.precision_note and "dW_key differs from finite differences" in str(report)


def test_accumulated_dW_attributes_are_zeroed_not_dropped():
    assert check("Accumulating").passed
    assert check("Accumulating_grad_doubled").backward.diagnosis.identifiers == ("grad_doubled",)


def test_an_out_proj_is_set_to_the_identity_or_named():
    report = check("MultiHeadOutProj")
    assert report.passed, str(report)
    assert "has an out_proj: it was set to the identity" in str(report)
    assert npattn.check_attention(attention_from_module(npattn, "MultiHeadAttention")).passed
    report = check("MultiHeadOutProjFunction")
    assert not report and "has an out_proj npattn check cannot set to the identity" in str(report)


def test_the_books_torch_multihead_attention_with_out_proj(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "book.py"
    path.write_text(
        "import torch\n"
        "class MultiHeadAttention(torch.nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads\n"
        "        self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.out_proj = torch.nn.Linear(d_out, d_out)\n"
        "        self.dropout = torch.nn.Dropout(dropout)\n"
        "        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))\n"
        "    def forward(self, x):\n"
        "        b, n, _ = x.shape\n"
        "        split = lambda t: t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)\n"
        "        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))\n"
        "        s = (q @ k.transpose(2, 3)).masked_fill(self.mask.bool()[:n, :n], -torch.inf)\n"
        "        w = self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1))\n"
        "        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out))\n"
    )
    assert torch is not None
    report = check_attention(f"{path}:MultiHeadAttention")
    assert report.passed and "has an out_proj: it was set to the identity" in str(report), str(report)


def test_the_verdict_counts_the_dropout_section(capsys):
    report = check("CausalBadDropout")
    assert report.diagnosis.correct and report.backward.passed and report.dropout.forward_wrong
    assert not report.passed
    assert report.verdict().startswith("FAILED: the forward is wrong (section 5")
    assert main(["check", f"{HOSTILE}:CausalBadDropout"]) == 1


@pytest.mark.parametrize("attention", [None, 5, 2.5, ["a.py:f"]])
def test_check_attention_of_something_else_is_a_config_error(attention):
    with pytest.raises(ConfigError, match=f"expected a 'FILE.py:NAME' spec.*got {type(attention).__name__}"):
        check_attention(attention)


def test_x_is_checked_before_the_user_code_runs():
    calls = []

    def attention(x, W_query, W_key, W_value):
        calls.append(x.shape)
        return learners.forward(x, W_query, W_key, W_value)[0]

    module = type(sys)("spy")
    module.attention = attention
    user = attention_from_module(module, "attention")
    assert check_attention(user, x=[[1.0, 2.0, 3.0]] * 4).passed  # a list works
    calls.clear()
    with pytest.raises(ShapeError, match=r"x: expected shape \(\.\.\., n, d_in=3\).*got \(6, 4\)"):
        check_attention(user, x=np.ones((6, 4)))
    with pytest.raises(ShapeError, match=r"x: expected shape \(n, d_in\).*got \(3,\)"):
        check_attention(user, x=np.ones(3))
    assert calls == []


def test_a_directory_is_named_as_one(tmp_path, capsys):
    assert main(["check", f"{tmp_path}:f"]) == 2
    assert f"'{tmp_path}' is a directory, expected a Python file" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["complex", "strings"])
def test_a_forward_returning_no_real_numbers_is_refused_not_converted(kind):
    def attention(x, W_query, W_key, W_value):
        out = learners.forward(x, W_query, W_key, W_value)[0]
        return out + 1e-3j if kind == "complex" else out.astype(str)

    module = type(sys)("odd")
    module.attention = attention
    with pytest.raises(DTypeError, match="returned an output of dtype"):
        check_attention(attention_from_module(module, "attention"))
