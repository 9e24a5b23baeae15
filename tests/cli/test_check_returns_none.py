"""A user function that returns nothing is told so (a missing return), not "dtype object"; integer
options take plain digits."""

from npattn.cli.main import main


def test_a_function_returning_none_is_named_as_such(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "u.py").write_text("def f(x, W_query, W_key, W_value):\n    z = x @ W_query\n")
    assert main(["check", "u.py:f"]) == 2
    err = capsys.readouterr().err
    assert err == "npattn check: error: f returned None (a missing return?), expected a real floating array\n"


def test_integer_options_take_plain_digits_only(capsys):
    """Python's int() takes '5_0' as 50, ' 5', '+5' and fullwidth digits: a command line does not."""
    for text in ["5_0", "\uff15", " 5", "+5"]:
        assert main(["trace", "--tokens", text]) == 2
        assert "expected an integer (digits 0-9)" in capsys.readouterr().err
    assert main(["train", "--task", "teacher-student", "--steps", "1_0"]) == 2
    assert "expected an integer (digits 0-9), got '1_0'" in capsys.readouterr().err
