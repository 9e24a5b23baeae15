"""Refusals that named the wrong thing: a Parameter in two groups was "some parameters appear in
more than one parameter group" (which one, and where?); a safetensors header with two
``__metadata__`` keys was said to name a tensor twice; a path under /proc/self/cwd was called "a
process's open files and settings ... not a file to replace"."""

import json

import numpy as np
import pytest
from safetensors_bytes import split

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.optim import Adam


def test_a_parameter_in_two_groups_is_named_with_its_group():
    params = list(npattn.SelfAttention_v1(3, 2).parameters())
    optimizer = Adam([params[0]])
    message = (r"some parameters appear in more than one parameter group: parameter group 1: its parameter at "
               r"position 1 \(shape \(3, 2\)\) is in parameter group 0 already")  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        optimizer.add_param_group({"params": [params[1], params[0]]})
    assert len(optimizer.param_groups) == 1
    with pytest.raises(ConfigError, match=message):
        Adam([{"params": [params[0]]}, {"params": [params[1], params[0]]}])


def test_a_repeated_metadata_key_is_not_called_a_tensor(tmp_path):
    pytest.importorskip("safetensors")
    path = tmp_path / "m.safetensors"
    npattn.save({"w": np.ones(2, dtype=np.float32)}, str(path))
    header, body = split(path.read_bytes())
    text = json.dumps(header)
    twice = text[:-1] + ', "__metadata__": ' + json.dumps(header["__metadata__"]) + "}"
    path.write_bytes(len(twice.encode()).to_bytes(8, "little") + twice.encode() + body)
    with pytest.raises(CheckpointError, match=r"names the key\(s\) \['__metadata__'\] more than once"):
        npattn.load(str(path))


def test_a_path_under_proc_says_npattn_writes_nothing_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=r"it lies under /proc, where npattn writes nothing .* outside /proc"):
        npattn.save({"w": np.ones(2)}, "/proc/self/cwd/pc.npz")
    assert not (tmp_path / "pc.npz").exists()


def test_a_numpy_string_is_saved_as_a_string(tmp_path):
    path = str(tmp_path / "s.npz")
    npattn.save({"name": np.str_("adam"), "names": [np.str_("a"), "b"]}, path)
    loaded = npattn.load(path)
    assert loaded == {"name": "adam", "names": ["a", "b"]} and type(loaded["name"]) is str


def test_a_user_file_named_with_a_newline_is_quoted(tmp_path, monkeypatch, capsys):
    from npattn.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a; b.py").write_text("def f(x, W_query, W_key, W_value):\n    return x\n")
    assert main(["check", "a\nb.py:f"]) == 2
    assert "no such file: 'a\\nb.py'" in capsys.readouterr().err


def test_a_file_on_the_way_is_named(tmp_path):
    (tmp_path / "plain").write_text("notes")
    with pytest.raises(CheckpointError, match=r"x\.npz': '.*plain' is a file, not a folder"):
        npattn.load(str(tmp_path / "plain" / "x.npz"))


def test_a_safetensors_file_named_npz_is_named_so(tmp_path):
    pytest.importorskip("safetensors")
    npattn.save({"w": np.ones(2, dtype=np.float32)}, str(tmp_path / "m.safetensors"))
    (tmp_path / "m.npz").write_bytes((tmp_path / "m.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match=r"looks like a \.safetensors file .*give it the \.safetensors extension"):
        npattn.load(str(tmp_path / "m.npz"))
