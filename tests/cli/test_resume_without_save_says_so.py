"""`npattn train --resume F` without --save trains, and its last line says that nothing was saved (it
ended silently: the steps were lost without a word)."""

import npattn
from npattn.cli.main import main


def test_a_resumed_run_without_save_says_its_steps_were_not_saved(tmp_path, capsys):
    path = str(tmp_path / "r.npz")
    assert main(["train", "--steps", "2", "--log-every", "0", "--save", path]) == 0
    capsys.readouterr()
    assert main(["train", "--steps", "3", "--log-every", "0", "--resume", path]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("not saved: no --save was given") and path in last, last
    assert npattn.load(path)["step"] == 2
