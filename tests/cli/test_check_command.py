"""npattn check under hostile code: the user's code runs in a child process with --timeout, gets
copies of x and the weights, and cannot end, hang or fool the process that reports on it."""

from __future__ import annotations

import textwrap

import pytest

from npattn.cli.check import parse_timeout
from npattn.cli.main import main
from npattn.errors import ConfigError

HOSTILE = textwrap.dedent(
    """
    import os
    import sys
    import numpy as np


    def _attention(x, W_query, W_key, W_value):
        queries, keys, values = x @ W_query, x @ W_key, x @ W_value
        scores = queries @ keys.T / np.sqrt(keys.shape[-1])
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        return weights / weights.sum(-1, keepdims=True) @ values


    def correct(x, W_query, W_key, W_value):
        return _attention(x, W_query, W_key, W_value)


    def scales_W_query(x, W_query, W_key, W_value):
        W_query *= 3.0
        return _attention(x, W_query, W_key, W_value)


    def zeroes_everything(x, W_query, W_key, W_value):
        for a in (x, W_query, W_key, W_value):
            a[...] = 0.0
        return np.zeros((x.shape[0], W_value.shape[1]))


    def doubles_x(x, W_query, W_key, W_value):
        x *= 2.0
        return _attention(x, W_query, W_key, W_value)


    def patches_the_check(x, W_query, W_key, W_value):
        diagnose = sys.modules["npattn.debug.diagnose"]
        real = diagnose.diagnose

        def lenient(x_, weights, output, **kwargs):
            good = _attention(*(np.asarray(a) for a in (x_, weights["W_query"], weights["W_key"], weights["W_value"])))
            return real(x_, weights, good, **kwargs)

        sys.modules["npattn.debug.usercode"].diagnose = lenient
        return np.zeros((x.shape[0], W_value.shape[1]))


    def exits(x, W_query, W_key, W_value):
        sys.exit(0)


    def interrupts(x, W_query, W_key, W_value):
        raise KeyboardInterrupt


    def ends_the_process(x, W_query, W_key, W_value):
        os._exit(0)


    def hangs(x, W_query, W_key, W_value):
        while True:
            pass


    class ForwardOnly:
        def __init__(self, d_in, d_out):
            self.W_query = self.W_key = self.W_value = np.zeros((d_in, d_out))

        def forward(self, x):
            return _attention(x, self.W_query, self.W_key, self.W_value)
    """
)


@pytest.fixture()
def hostile(tmp_path):
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    return path


@pytest.mark.parametrize("name, code", [("correct", 0), ("ForwardOnly", 0)])
def test_code_that_edits_its_arguments_is_judged_on_pristine_ones(hostile, capsys, name, code):
    assert main(["check", f"{hostile}:{name}"]) == code
    assert ("correct: the output equals the reference" in capsys.readouterr().out) == (code == 0)


@pytest.mark.parametrize(
    "name, edited",
    [("scales_W_query", "W_query"), ("zeroes_everything", "W_query, W_key, W_value, x"), ("doubles_x", "x")],
)
def test_a_function_that_edits_what_it_is_given_is_refused(hostile, capsys, name, edited):
    """It gets copies, so nothing here is harmed; on a real model the weights would change."""
    assert main(["check", f"{hostile}:{name}"]) == 2
    assert f"{name} changed its input(s) {edited} in place" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, message",
    [
        ("patches_the_check", "the code changed NumPy or npattn while it ran; not certified"),
        ("exits", "called sys.exit(0)"),
        ("interrupts", "raised KeyboardInterrupt"),
        ("ends_the_process", "ended the process before npattn check could report (exit code 0)"),
    ],
)
def test_code_that_ends_or_fools_the_check_gets_one_line_and_exit_2(hostile, capsys, name, message):
    assert main(["check", f"{hostile}:{name}"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_code_that_hangs_is_stopped_after_the_timeout(hostile, capsys):
    assert main(["check", f"{hostile}:hangs", "--timeout", "0.5"]) == 2
    assert "did not finish within 0.5 s" in capsys.readouterr().err


AT_IMPORT = ["import sys\nsys.exit(3)\n", "while True:\n    pass\n", "raise KeyboardInterrupt\n"]


@pytest.mark.parametrize("source", AT_IMPORT)
def test_a_file_that_exits_hangs_or_interrupts_at_import(tmp_path, capsys, source):
    path = tmp_path / "at_import.py"
    path.write_text(source)
    assert main(["check", f"{path}:f", "--timeout", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npattn check: error: ") and err.count("\n") == 1


def test_a_file_that_exits_at_import_is_blamed_not_its_function(tmp_path, capsys):
    """The function named used to be blamed ("at_import.py:f called sys.exit(3)"): it never ran."""
    path = tmp_path / "at_import.py"
    path.write_text("import sys\nsys.exit(3)\ndef f(x, W_query, W_key, W_value):\n    return x\n")
    assert main(["check", f"{path}:f"]) == 2
    err = capsys.readouterr().err
    assert f"importing {path} called sys.exit(3) before its functions could be checked" in err, err
    assert ":f called" not in err


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "abc"])
def test_timeout_must_be_a_positive_number(hostile, capsys, text):
    with pytest.raises(ConfigError, match="--timeout must be a number of seconds > 0"):
        parse_timeout(text)
    assert main(["check", f"{hostile}:correct", "--timeout", text]) == 2
