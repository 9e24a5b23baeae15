"""``npattn trace`` sizes whose weights alone exceed the machine's memory drew them first (minutes of
work, then a MemoryError traceback); they are refused in one line before anything is built."""

from npattn.cli.main import main


def test_weights_larger_than_memory_are_refused_first(capsys):
    args = ["trace", "--tokens", "4096", "--d-in", "4096", "--d-out", "4096", "--class", "wrapper", "--heads", "64"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "building wrapper's weights for d_in=4096, d_out=4096 would need" in err and err.count("\n") == 1
