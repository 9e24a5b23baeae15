"""A user function that returns nothing is told so (a missing return), not "dtype object"."""

from npattn.cli.main import main


def test_a_function_returning_none_is_named_as_such(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "u.py").write_text("def f(x, W_query, W_key, W_value):\n    z = x @ W_query\n")
    assert main(["check", "u.py:f"]) == 2
    err = capsys.readouterr().err
    assert err == "npattn check: error: f returned None (a missing return?), expected a real floating array\n"
