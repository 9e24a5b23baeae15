"""Ctrl-C on a resumed run before its first save, to a path that never existed, says that the
path does not exist, never that it "is as it was before the run"; an existing untouched path
still is."""

from step_hooks import on_step

from npattn.cli.main import main


def _interrupt():
    raise KeyboardInterrupt


def _interrupt_on_step(monkeypatch, call):
    on_step(monkeypatch, call, _interrupt)


def test_resumed_run_interrupted_before_a_save_that_never_existed(tmp_path, monkeypatch, capsys):
    first, fresh = tmp_path / "r.npz", tmp_path / "f.npz"
    assert main(["train", "--task", "teacher-student", "--steps", "2", "--save", str(first)]) == 0
    capsys.readouterr()
    _interrupt_on_step(monkeypatch, 2)
    args = ["train", "--resume", str(first), "--steps", "6", "--save", str(fresh)]
    assert main(args) == 130
    err = capsys.readouterr().err
    assert err == f"npattn train: interrupted at step 3; no checkpoint was written: '{fresh}' does not exist\n"
    assert not fresh.exists()


def test_an_existing_untouched_target_is_as_before(tmp_path, monkeypatch, capsys):
    ck = tmp_path / "r.npz"
    assert main(["train", "--task", "teacher-student", "--steps", "2", "--save", str(ck)]) == 0
    capsys.readouterr()
    _interrupt_on_step(monkeypatch, 2)
    assert main(["train", "--resume", str(ck), "--steps", "6", "--save", str(ck)]) == 130
    assert capsys.readouterr().err.endswith(f"no checkpoint was written: '{ck}' is as it was before the run\n")
