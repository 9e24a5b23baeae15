"""A value that starts with "--" but holds a space (``--prompt "-- hi"``) is a value to argparse, not
an option; given twice (under two options) it was counted as a repeated option and the run refused."""

import pytest

from npattn.cli.main import _repeated_option, main


@pytest.mark.parametrize(
    ("argv", "repeated"),
    [
        (["lm", "--prompt", "-- hi", "--out", "-- hi"], None),
        (["lm", "--prompt", "-- hi", "--prompt", "-- ho"], "--prompt"),
        (["train", "--lr=0.1", "--lr", "0.2"], "--lr"),
        (["train", "--save", "a", "--", "--save"], None),
    ],
)
def test_only_option_names_count(argv, repeated):
    assert _repeated_option(argv) == repeated


def test_a_value_starting_with_two_dashes_reaches_the_command(capsys):
    assert main(["trace", "--tokens", "-- 4", "--seed", "-- 5"]) == 2
    err = capsys.readouterr().err
    assert "more than once" not in err and "--tokens" in err and err.count("\n") == 1
