"""`npattn trace --heads N` without --class names the default class it refused, as the default."""

import pytest

from npattn.cli.main import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["trace", "--heads", "2"], "not to the default --class v1"),
        (["trace", "--class", "v2", "--heads", "2"], "not to --class v2"),
    ],
)
def test_heads_without_a_multihead_class_names_the_class(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--heads applies to --class wrapper or mha, {said}" in err and len(err.strip().splitlines()) == 1
