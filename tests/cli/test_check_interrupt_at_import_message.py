"""npattn check of a file that raises KeyboardInterrupt at import says what happened (it said
"f raised KeyboardInterrupt:" with nothing after the colon)."""

from npattn.cli.main import main


def test_keyboard_interrupt_at_import_is_named(tmp_path, capsys):
    path = tmp_path / "kbint.py"
    path.write_text("raise KeyboardInterrupt\ndef f(x, W_query, W_key, W_value):\n    return x\n")
    assert main(["check", f"{path}:f"]) == 2
    err = capsys.readouterr().err.strip()
    assert "raised KeyboardInterrupt (its code, at import or when run, or a SIGINT it sent)" in err, err
    assert not err.endswith(":"), err
