"""What the operating system refuses, simulated (the tests run as root, which passes every
permission check): a read-only target or folder, a folder that refuses new files (/proc is one
even for root), an unreadable checkpoint. Each gives a CheckpointError naming the path, leaves the
old file as it was and no temporary file; ``npattn train`` refuses before training when it can
know, else tells the truth about which checkpoint is intact. And ``load`` refuses every dtype
``save`` refuses."""

import builtins
import io
import os
import re
import zipfile

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.train import atomic
from npattn.train.command import train_task

OLD = {"w": np.arange(3.0)}


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "ck.npz"
    npattn.save(OLD, path)
    return path


def _intact(path) -> None:
    np.testing.assert_array_equal(npattn.load(path)["w"], OLD["w"])
    assert sorted(os.listdir(path.parent)) == [path.name], "a temporary file was left behind"


def test_a_read_only_target_is_refused_before_writing(old_file, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if mode & os.W_OK and str(p) == str(old_file) else real_access(p, mode)
    )
    with pytest.raises(
        npattn.CheckpointError,
        match=rf"cannot write checkpoint '{old_file}': the file cannot be replaced \(permission denied",
    ):
        npattn.save({"w": np.zeros(3)}, old_file)
    _intact(old_file)


def test_a_read_only_folder_is_refused_before_writing(old_file, monkeypatch):
    real_access = os.access
    folder = str(old_file.parent)
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == folder else real_access(p, mode))
    with pytest.raises(npattn.CheckpointError, match=rf"permission denied in the folder '{folder}'"):
        npattn.save({"w": np.zeros(3)}, old_file)
    _intact(old_file)


@pytest.mark.parametrize("where", ["create", "replace", "write"])
def test_the_os_refusing_the_write_keeps_the_old_file_and_no_temp(old_file, monkeypatch, where):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    if where == "create":  # the temporary file: os.open refuses
        monkeypatch.setattr(os, "open", refuse)
    elif where == "replace":
        monkeypatch.setattr(os, "replace", refuse)
    else:
        monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(
        npattn.CheckpointError,
        match=rf"could not write checkpoint '{old_file}': Permission denied; the previous file \(if any\) is untouched",
    ):
        npattn.save({"w": np.zeros(3)}, old_file)
    monkeypatch.undo()
    _intact(old_file)


@pytest.mark.skipif(not os.path.isdir("/sys/block"), reason="needs /sys")
def test_a_folder_that_refuses_new_files_even_for_root(monkeypatch):
    with pytest.raises(npattn.CheckpointError, match=r"permission denied in the folder '/sys'"):
        npattn.save(OLD, "/sys/npattn.npz")  # its mode (555, like /proc) has no write bit: refused for root too
    monkeypatch.setattr(atomic, "_writable_bits", lambda mode: True)  # past the mode bits: the OS refuses
    with pytest.raises(npattn.CheckpointError, match=r"could not write checkpoint '/sys/npattn\.npz'"):
        npattn.save(OLD, "/sys/npattn.npz")
    with pytest.raises(npattn.CheckpointError, match=r"the folder '/sys' refuses a new file"):
        atomic.probe_target("/sys/npattn.npz")
    assert not os.path.exists("/sys/npattn.npz")


@pytest.mark.skipif(not os.path.isdir("/sys/block"), reason="needs /sys")
def test_train_refuses_an_unwritable_save_before_training(capsys, monkeypatch):
    import npattn.train.command as command

    monkeypatch.setattr(command, "fit", lambda *a, **k: pytest.fail("trained before refusing the save target"))
    monkeypatch.setattr(atomic, "_writable_bits", lambda mode: True)  # past the mode bits: the OS refuses
    with pytest.raises(npattn.CheckpointError, match="refuses a new file"):
        train_task("teacher-student", steps=2, save="/sys/run.npz")
    assert main(["train", "--task", "teacher-student", "--steps", "2", "--save", "/sys/run.npz"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot write checkpoint '/sys/run.npz'" in err and "Traceback" not in err
    pytest.importorskip("matplotlib")  # the language-model run checks its target the same way
    from npattn.train.lm_run import run_lm

    monkeypatch.setattr("npattn.train.lm_run.train_lm", lambda *a, **k: pytest.fail("trained first"))
    with pytest.raises(npattn.CheckpointError, match="refuses a new file"):
        run_lm({"steps": 1}, save="/sys/run.npz", out=None)


def _replace_refused_after_two(monkeypatch):
    """os.replace works twice (two checkpoints are written), then the OS refuses it."""
    real_replace, calls = os.replace, []

    def replace_twice(src, dst):
        calls.append(dst)
        if len(calls) > 2:
            raise PermissionError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_twice)


def test_a_save_refused_mid_run_tells_which_checkpoint_is_intact(tmp_path, monkeypatch):
    ck = tmp_path / "run.npz"
    _replace_refused_after_two(monkeypatch)
    with pytest.raises(npattn.CheckpointError) as info:
        train_task("teacher-student", steps=5, save=ck, save_every=1)
    assert "could not write checkpoint" in str(info.value)
    assert f"The last checkpoint of this run, '{ck}', holds step 2." in str(info.value)
    monkeypatch.undo()
    assert npattn.load(ck)["step"] == 2
    assert sorted(os.listdir(tmp_path)) == ["run.npz"]


def test_a_language_model_save_refused_mid_run_tells_which_checkpoint_is_intact(tmp_path, monkeypatch):
    from training_bad_inputs import LM_TINY

    from npattn.train.lm_run import run_lm

    text = tmp_path / "t.txt"
    text.write_text("The effort moves you forward, and then some more. " * 60, encoding="utf-8")
    ck = tmp_path / "lm.npz"
    _replace_refused_after_two(monkeypatch)
    with pytest.raises(npattn.CheckpointError) as info:
        run_lm({**LM_TINY, "text": str(text), "steps": 5}, save=ck, save_every=1, out=None)
    assert "could not write checkpoint" in str(info.value)
    assert str(info.value).endswith(f"The last checkpoint of this run, '{ck}', holds step 2.")
    monkeypatch.undo()
    assert npattn.load(ck)["history"]["global_step"] == 1


def test_an_unreadable_checkpoint_is_a_clear_error(old_file, monkeypatch, tmp_path):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(old_file) else real_access(p, mode))
    with pytest.raises(npattn.CheckpointError, match=rf"cannot read checkpoint '{old_file}': permission denied"):
        npattn.load(old_file)
    monkeypatch.undo()
    real_open = builtins.open

    def refuse(file, *args, **kwargs):
        if str(file) == str(old_file) or str(file).endswith(".safetensors"):
            raise PermissionError(13, "Permission denied")
        return real_open(file, *args, **kwargs)

    safe = tmp_path / "m.safetensors"
    if pytest.importorskip("safetensors"):
        npattn.save(OLD, safe)
    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(io, "open", refuse)
    for path in (old_file, safe):
        with pytest.raises(npattn.CheckpointError, match=rf"cannot read checkpoint '{path}': Permission denied$"):
            npattn.load(path)


# ----------------------------------------------------------------------------------------------
# load refuses what save refuses


def test_safetensors_load_refuses_the_dtypes_save_refuses(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    for dtype, name in [(np.complex64, "C64")]:
        with pytest.raises(npattn.CheckpointError, match=f"dtype {np.dtype(dtype)}"):
            npattn.save({"w": np.ones(3, dtype)}, tmp_path / "x.safetensors")
        st.save_file({"ok": np.ones(2), "w": np.ones(3, dtype)}, tmp_path / "c.safetensors")
        message = rf"tensor 'w' has dtype {name}, which npattn neither saves nor loads \(bool, int, uint"
        with pytest.raises(npattn.CheckpointError, match=message):
            npattn.load(tmp_path / "c.safetensors")
        with pytest.raises(npattn.CheckpointError, match=message):
            npattn.load_metadata(tmp_path / "c.safetensors")
    for dtype in (np.float16, np.int8, np.uint64, np.bool_):  # what save writes, load reads
        npattn.save({"w": np.ones(3, dtype)}, tmp_path / "ok.safetensors")
        assert npattn.load(tmp_path / "ok.safetensors")["w"].dtype == dtype


def test_safetensors_bfloat16_says_how_to_convert(tmp_path):
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    stt.save_file({"w": torch.ones(3, dtype=torch.bfloat16)}, tmp_path / "b.safetensors")
    with pytest.raises(npattn.CheckpointError, match=r"dtype BF16, .*convert it with tensor.float\(\) before saving"):
        npattn.load(tmp_path / "b.safetensors")


@pytest.mark.parametrize("dtype", [np.complex64, "datetime64[s]", "V4"])
def test_npz_load_refuses_the_dtypes_save_refuses(tmp_path, dtype):
    with pytest.raises(npattn.CheckpointError, match="cannot save state\\['w'\\]: dtype"):
        npattn.save({"w": np.zeros(3, dtype)}, tmp_path / "x.npz")
    npattn.save({"w": np.zeros(3)}, tmp_path / "good.npz")
    with zipfile.ZipFile(tmp_path / "good.npz") as z:
        members = {name: z.read(name) for name in z.namelist()}
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3, dtype))
    members["w.npy"] = buffer.getvalue()
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    shown = re.escape(str(np.dtype(dtype)))
    with pytest.raises(npattn.CheckpointError, match=rf"member .w. is not a numeric .npy array \(dtype {shown}\)"):
        npattn.load(tmp_path / "bad.npz")


def test_a_long_file_name_that_open_accepts_is_saved(tmp_path):
    target = tmp_path / ("a" * 246 + ".npz")  # 250 characters: open() takes it; the temporary file's name must too
    model = npattn.SelfAttention_v1(3, 2, rng=0)
    npattn.save(model, target)
    assert os.listdir(tmp_path) == [target.name]
    np.testing.assert_array_equal(npattn.load(target)["W_query"], model.W_query.data)
