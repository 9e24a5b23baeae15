"""Checkpoints lose nothing and run nothing: exact round trips, atomic saves interrupted at every
step, and every kind of bad file refused with CheckpointError without executing anything."""

import io
import json
import os
import pickle
import re
import stat
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import npattn
from npattn.optim import Adam
from npattn.train import atomic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trained_state():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    opt = Adam(model.parameters(), lr=0.1, amsgrad=True)
    model.backward(np.ones((6, 2), dtype=np.float32) + model(npattn.book_inputs()))
    opt.step()
    return model, opt


def assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b or (a != a and b != b)


# ----------------------------------------------------------------------------------------------
# Round trips


def test_module_state_dict_round_trip(tmp_path):
    model, _ = trained_state()
    npattn.save(model, tmp_path / "m.npz")
    loaded = npattn.load(tmp_path / "m.npz")
    assert_same(dict(model.state_dict()), loaded)
    fresh = npattn.SelfAttention_v1(3, 2, rng=1)
    fresh.load_state_dict(loaded)
    np.testing.assert_array_equal(fresh(npattn.book_inputs()), model(npattn.book_inputs()))
    meta = npattn.load_metadata(tmp_path / "m.npz")
    assert meta == {
        "format": "npattn-checkpoint",
        "version": 1,
        "class": "SelfAttention_v1",
        "config": {"d_in": 3, "d_out": 2},
    }


def test_nested_state_round_trip_keeps_types(tmp_path):
    _, opt = trained_state()
    state = {
        "optimizer": opt.state_dict(),  # int keys, tuples (betas), bools, floats
        "step": 7,
        "name": "run/α",  # non-ASCII strings survive; '/' only in values
        "nothing": None,
        "nan": float("nan"),
        "big": 2**70,
        "scalar": np.float64(0.1),
        "empty": np.zeros((0, 3)),
        "ints": np.arange(5, dtype=np.int64),
        "mask": np.array([True, False]),
        "list": [1, 2.5, [np.ones(2, dtype=np.float32)]],
    }
    npattn.save(state, tmp_path / "s.npz", metadata={"note": "hello"})
    loaded = npattn.load(tmp_path / "s.npz")
    assert_same(state, loaded)
    assert npattn.load_metadata(tmp_path / "s.npz")["note"] == "hello"
    opt2 = Adam(list(trained_state()[0].parameters()))
    opt2.load_state_dict(loaded["optimizer"])
    assert opt2.param_groups[0]["betas"] == (0.9, 0.999) and opt2.param_groups[0]["amsgrad"] is True


@pytest.mark.parametrize(
    "value,message",
    [
        ({"a": np.array([object()])}, "dtype object"),
        ({"a": np.array(["text"])}, "dtype <U4"),
        ({"a": {1, 2}}, "type set"),
        ({(1, 2): 3}, "keys must be str or int"),
        ({"a": 1j}, "type complex"),
    ],
)
def test_save_refuses_what_would_need_pickle(tmp_path, value, message):
    with pytest.raises(npattn.CheckpointError, match=message):
        npattn.save(value, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def test_save_refuses_non_mappings(tmp_path):
    with pytest.raises(npattn.CheckpointError, match="expects a state dict"):
        npattn.save([np.ones(2)], tmp_path / "x.npz")


# ----------------------------------------------------------------------------------------------
# Interrupted saves: at every step of the atomic write, the previous checkpoint survives.


class Interrupt(BaseException):
    """Stands for a crash or Ctrl-C (not an Exception, so nothing can swallow it)."""


class FailingFile:
    """Wraps the temporary file; raises ``error`` at ``where`` ("write" after writing half the bytes, or "flush")."""

    def __init__(self, f, where, error):
        self.f, self.where, self.error = f, where, error

    def write(self, data):
        if self.where == "write":
            self.f.write(data[: len(data) // 2])
            raise self.error("crash mid-write")
        return self.f.write(data)

    def flush(self):
        if self.where == "flush":
            raise self.error("crash at flush")
        self.f.flush()

    def fileno(self):
        return self.f.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


STEPS = ["create", "write", "flush", "fsync", "replace"]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("error", [Interrupt, OSError])
def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch, step, error):
    path = tmp_path / "model.npz"
    old = {"W": np.arange(6.0).reshape(2, 3)}
    npattn.save(old, path)
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise error(f"simulated failure at {step}")

    real_fdopen = os.fdopen
    if step == "create":  # the temporary file
        monkeypatch.setattr(atomic, "temp_file", fail)
    elif step in ("write", "flush"):

        def fdopen(fd, mode):
            return FailingFile(real_fdopen(fd, mode), step, error)

        monkeypatch.setattr(atomic.os, "fdopen", fdopen)
    else:
        monkeypatch.setattr(atomic.os, step, fail)
    # an OSError (a full disk, ...) is reported as a CheckpointError; a crash (Interrupt) propagates
    with pytest.raises(npattn.CheckpointError if error is OSError else error):
        npattn.save({"W": np.ones((5, 5))}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert_same(npattn.load(path), old)
    assert os.listdir(tmp_path) == ["model.npz"]  # the temporary file was removed


@pytest.mark.parametrize("step", ["write", "fsync", "replace", "after_replace"])
def test_killed_process_leaves_a_loadable_checkpoint(tmp_path, step):
    """A real kill (os._exit, no cleanup) at each step: the target is the old or the new file, whole."""
    path = tmp_path / "model.npz"
    npattn.save({"W": np.zeros(3)}, path)
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {ROOT!r})
        import numpy as np
        import npattn
        from npattn.train import atomic
        step = {step!r}
        real_fdopen, real_replace = os.fdopen, os.replace
        class Half:
            def __init__(self, f): self.f = f
            def write(self, data): self.f.write(data[: len(data) // 2]); self.f.flush(); os._exit(9)
            def __enter__(self): return self
            def __exit__(self, *a): pass
        if step == "write":
            atomic.os.fdopen = lambda fd, mode: Half(real_fdopen(fd, mode))
        elif step == "fsync":
            atomic.os.fsync = lambda fd: os._exit(9)
        elif step == "replace":
            atomic.os.replace = lambda a, b: os._exit(9)
        else:
            atomic.os.replace = lambda a, b: (real_replace(a, b), os._exit(9))
        npattn.save({{"W": np.ones(3)}}, {str(path)!r})
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 9, result.stderr
    W = npattn.load(path)["W"]
    np.testing.assert_array_equal(W, np.ones(3) if step == "after_replace" else np.zeros(3))
    npattn.save({"W": np.full(3, 2.0)}, path)  # a stale temporary file does not get in the way
    np.testing.assert_array_equal(npattn.load(path)["W"], 2.0)


# ----------------------------------------------------------------------------------------------
# Bad files: refused with CheckpointError, nothing executed.


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.npz"
    npattn.save(trained_state()[0], path)
    return path


def test_missing_file(tmp_path):
    with pytest.raises(npattn.CheckpointError, match="does not exist"):
        npattn.load(tmp_path / "nope.npz")


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_truncated_files(good, fraction):
    data = good.read_bytes()
    good.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(npattn.CheckpointError, match="truncated, corrupt or not a checkpoint"):
        npattn.load(good)


def test_every_single_byte_truncation_of_a_small_checkpoint_is_refused(tmp_path):
    path = tmp_path / "small.npz"
    npattn.save({"a": np.ones(1)}, path)
    data = path.read_bytes()
    for n in range(len(data)):
        path.write_bytes(data[:n])
        with pytest.raises(npattn.CheckpointError):
            npattn.load(path)


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(tmp_path, seed):
    path = tmp_path / "random.npz"
    path.write_bytes(np.random.default_rng(seed).bytes(1000 * (seed + 1)))
    with pytest.raises(npattn.CheckpointError):
        npattn.load(path)


def test_flipped_bytes_in_the_index_are_refused(good):
    data = bytearray(good.read_bytes())
    start = data.index('"tree"'.encode("utf-32-le"))  # the index is stored as a NumPy unicode array
    data[start + 10 : start + 14] = b"\xff\xfe\x00\x01"
    good.write_bytes(bytes(data))
    with pytest.raises(npattn.CheckpointError):
        npattn.load(good)


def test_foreign_npz_and_npy(tmp_path):
    np.savez(tmp_path / "plain.npz", W=np.ones(3))
    with pytest.raises(npattn.CheckpointError, match=r"not an npattn checkpoint \(no '__npattn__' entry; members: W"):
        npattn.load(tmp_path / "plain.npz")
    np.save(tmp_path / "single.npy", np.ones(3))
    with pytest.raises(npattn.CheckpointError, match=r"single \.npy array"):
        npattn.load(tmp_path / "single.npy")


def test_zip_with_wrong_members(tmp_path):
    path = tmp_path / "wrong.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("hello.txt", "hi")
        z.writestr("__npattn__.npy", "not an npy header")
    with pytest.raises(npattn.CheckpointError):
        npattn.load(path)


def test_members_that_do_not_match_the_index(tmp_path, good):
    with zipfile.ZipFile(good) as z:
        members = {name: z.read(name) for name in z.namelist()}
    for drop, extra in [("W_key.npy", None), (None, "intruder.npy")]:
        path = tmp_path / "edited.npz"
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                if name != drop:
                    z.writestr(name, data)
            if extra:
                buf = io.BytesIO()
                np.save(buf, np.ones(2))
                z.writestr(extra, buf.getvalue())
        with pytest.raises(npattn.CheckpointError, match="members do not match the index"):
            npattn.load(path)


def test_other_versions_and_formats(tmp_path):
    for header, message in [
        ('{"format": "npattn-checkpoint", "version": 99}', "version 99"),
        ('{"x": 1}', "does not describe"),
    ]:
        path = tmp_path / "v.npz"
        np.savez(path, __npattn__=np.array(header))
        with pytest.raises(npattn.CheckpointError, match=message):
            npattn.load(path)


class Payload:
    """Unpickling this object would create the marker file: proof of code execution."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickled_object_in_npz_is_refused_and_never_run(tmp_path, good):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npz"
    with zipfile.ZipFile(good) as z:
        members = {name: z.read(name) for name in z.namelist()}
    buf = io.BytesIO()
    np.save(buf, np.array([Payload(str(marker))], dtype=object), allow_pickle=True)
    members["W_key.npy"] = buf.getvalue()  # a member the index expects, now holding a pickle
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(npattn.CheckpointError, match="pickled data"):
        npattn.load(path)
    assert not marker.exists()
    # the header member itself pickled
    np.savez(path, __npattn__=np.array([Payload(str(marker))], dtype=object))
    with pytest.raises(npattn.CheckpointError, match="pickled data"):
        npattn.load(path)
    assert not marker.exists()


def test_raw_pickle_file_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npz"
    path.write_bytes(pickle.dumps(Payload(str(marker))))
    with pytest.raises(npattn.CheckpointError, match="pickled data"):
        npattn.load(path)
    assert not marker.exists()


# ----------------------------------------------------------------------------------------------
# safetensors (optional extra)


def test_safetensors_missing_package_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(npattn.CheckpointError, match=r"pip install 'npattn\[safetensors\]'"):
        npattn.save(trained_state()[0], tmp_path / "m.safetensors")


def test_safetensors_round_trip(tmp_path):
    pytest.importorskip("safetensors")
    model, opt = trained_state()
    path = tmp_path / "m.safetensors"
    npattn.save(model, path)
    assert_same(dict(model.state_dict()), npattn.load(path))
    assert npattn.load_metadata(path)["class"] == "SelfAttention_v1"
    with pytest.raises(npattn.CheckpointError, match="flat name -> array"):
        npattn.save(opt, tmp_path / "o.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(npattn.CheckpointError, match="not a safetensors file"):
        npattn.load(path)
    path.write_bytes(b"\x00" * 7)
    with pytest.raises(npattn.CheckpointError):
        npattn.load(path)


class TorchSelfAttention_v1:
    """The book's class (section 3.4.2), built when torch is available."""

    @staticmethod
    def make(torch, d_in, d_out):
        class SelfAttention_v1(torch.nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
                self.W_query = torch.nn.Parameter(torch.rand(d_in, d_out))
                self.W_key = torch.nn.Parameter(torch.rand(d_in, d_out))
                self.W_value = torch.nn.Parameter(torch.rand(d_in, d_out))

            def forward(self, x):
                keys = x @ self.W_key
                queries = x @ self.W_query
                values = x @ self.W_value
                attn_scores = queries @ keys.T
                attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
                return attn_weights @ values

        return SelfAttention_v1(d_in, d_out)


@pytest.mark.torch
def test_safetensors_to_torch_and_back(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file, save_file

    # trained here -> the book's PyTorch class
    model, _ = trained_state()
    npattn.save(model, tmp_path / "np.safetensors")
    book = TorchSelfAttention_v1.make(torch, 3, 2)
    book.load_state_dict(load_file(str(tmp_path / "np.safetensors")))
    x = npattn.book_inputs()
    np.testing.assert_allclose(book(torch.from_numpy(x)).detach().numpy(), model(x), rtol=1e-6)
    # PyTorch's -> npattn
    torch.manual_seed(7)
    book = TorchSelfAttention_v1.make(torch, 3, 2)
    save_file(book.state_dict(), str(tmp_path / "torch.safetensors"))
    mine = npattn.SelfAttention_v1(3, 2, rng=0)
    mine.load_state_dict(npattn.load(tmp_path / "torch.safetensors"))
    np.testing.assert_array_equal(mine.W_value.data, book.W_value.detach().numpy())
    np.testing.assert_allclose(mine(x), book(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# save never writes what load refuses; targets that are not files; loading bounded by the file.


@pytest.mark.parametrize(
    "state",
    [
        {"a/b": np.ones(1), "a": {"b": np.zeros(1)}},
        {"__npattn__": np.ones(1), "__npattn__.npy": np.ones(2), "w.npy": np.ones(3), "w": np.ones(4)},
        {0: np.ones(1), "0": np.zeros(1), -1: np.ones(2), 2**70: 3},
        {"a\x00b": np.ones(1), "a\udc80": np.ones(2), "k" * 70000: np.ones(3), "..": np.ones(4), "": np.ones(5)},
        {"allow_pickle": np.ones(1), "file": np.ones(2), "args": np.ones(3)},  # np.savez's own keywords
        {"x": "a\udc80\x00", "y": float("-inf"), "z": [(), {}, [[]]]},
    ],
    ids=["slash", "reserved-looking", "int-and-str", "odd-names", "savez-keywords", "odd-values"],
)
def test_any_key_round_trips(tmp_path, state):
    npattn.save(state, tmp_path / "x.npz")
    assert_same(npattn.load(tmp_path / "x.npz"), state)


@pytest.mark.parametrize(
    "state,metadata,message",
    [
        ({"w": np.ones(1)}, {"format": "x"}, "reserved"),
        ({"w": np.ones(1)}, {"version": 2}, "reserved"),
        ({"w": np.ones(1)}, {"tree": 1}, "reserved"),
        ({"w": np.ones(1)}, {1: "a"}, "keys must be str"),
        ({"w": np.ones(1)}, {"x": (1, 2)}, "use a list"),
        ({"w": np.ones(1)}, {"x": np.ones(2)}, "is a ndarray"),
        ({"w": np.ones(1)}, {"extra": {"d": {2: 1}}}, "keys must be str"),
        ({"w": np.ones(1)}, {"config": {"d": 1}}, "reserved"),
        ({"w": np.ones(1)}, ["x"], "metadata must be a dict"),
        ({"w": np.ma.masked_array([1.0], mask=[True])}, None, "masked array"),
        ({"a": {"a": {"a": None}}}, None, None),  # replaced below: nested 100 deep
    ],
)
def test_save_refuses_before_touching_the_old_file(tmp_path, state, metadata, message):
    if message is None:
        for _ in range(100):
            state = {"a": state}
        message = "nested deeper than 64 levels"
    path = tmp_path / "x.npz"
    npattn.save({"old": np.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(npattn.CheckpointError, match=re.escape(message)):
        npattn.save(state, path, metadata=metadata)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["x.npz"]


def test_a_state_that_contains_itself_is_refused(tmp_path):
    state = {"w": [np.ones(1)]}
    state["w"].append(state)
    with pytest.raises(npattn.CheckpointError, match="contains itself"):
        npattn.save(state, tmp_path / "x.npz")
    shared = np.ones(2)
    npattn.save({"a": shared, "b": [shared, shared]}, tmp_path / "x.npz")  # shared, not circular: fine


def test_targets_that_are_not_files_are_refused_and_left_alone(tmp_path):
    folder = tmp_path / "runs.npz"
    folder.mkdir()
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    for target, kind in [(folder, "a directory"), (fifo, "a FIFO")]:
        with pytest.raises(npattn.CheckpointError, match=f"it is {kind}"):
            npattn.save({"w": np.ones(1)}, target)
        with pytest.raises(npattn.CheckpointError, match=f"is {kind}"):
            npattn.load(target)  # never opened: a FIFO would hang the read
    assert folder.is_dir() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(npattn.CheckpointError, match="does not exist"):
        npattn.save({"w": np.ones(1)}, tmp_path / "missing" / "x.npz")
    for bad in ("", None, 3, io.BytesIO()):
        with pytest.raises(npattn.CheckpointError, match="checkpoint path"):
            npattn.save({"w": np.ones(1)}, bad)
    assert sorted(os.listdir(tmp_path)) == ["pipe.npz", "runs.npz"]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_device_node_is_never_replaced(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(npattn.CheckpointError, match="a character device"):
        npattn.save({"w": np.ones(1)}, node)
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_symlink_is_followed_and_kept(tmp_path):
    real = tmp_path / "real.npz"
    npattn.save({"old": np.ones(1)}, real)
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    npattn.save({"new": np.ones(2)}, link)
    assert link.is_symlink() and list(npattn.load(real)) == ["new"]


def test_permissions_are_kept_and_new_files_follow_the_umask(tmp_path):
    path = tmp_path / "x.npz"
    old_umask = os.umask(0o027)
    try:
        npattn.save({"w": np.ones(1)}, path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
        os.chmod(path, 0o604)
        npattn.save({"w": np.ones(2)}, path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o604
    finally:
        os.umask(old_umask)


def test_a_full_disk_is_a_checkpoint_error_that_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "x.npz"
    npattn.save({"old": np.ones(1)}, path)
    before = path.read_bytes()

    monkeypatch.setattr(atomic.os, "fdopen", lambda fd, mode: FailingFile(open(fd, mode), "write", OSError))
    with pytest.raises(npattn.CheckpointError, match=r"the previous file .* is untouched"):
        npattn.save({"new": np.ones(1000)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["x.npz"]


def _members(path):
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def _rezip(path, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_loading_is_bounded_by_the_file(tmp_path, good):
    members = _members(good)
    bomb = tmp_path / "bomb.npz"
    _rezip(bomb, members, zipfile.ZIP_DEFLATED)
    with pytest.raises(npattn.CheckpointError, match="is compressed"):
        npattn.load(bomb)
    # a member whose .npy header declares 10**12 values it does not hold: refused before allocating
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    huge = tmp_path / "huge.npz"
    _rezip(huge, {**members, "W_key.npy": b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()})
    for read in (npattn.load, npattn.load_metadata):
        with pytest.raises(npattn.CheckpointError, match=re.escape("declares shape (1000000, 1000000)")):
            read(huge)
    # the zip directory claims more bytes than the file holds (the first central-directory entry's sizes)
    lying = tmp_path / "lying.npz"
    data = bytearray(good.read_bytes())
    entry = data.index(b"PK\x01\x02")
    data[entry + 20 : entry + 28] = (2**31).to_bytes(4, "little") * 2  # compressed and uncompressed size
    lying.write_bytes(bytes(data))
    with pytest.raises(npattn.CheckpointError, match="the zip directory declares 2147"):
        npattn.load(lying)


def test_repeated_members_are_refused(tmp_path, good):
    members = _members(good)
    path = tmp_path / "twice.npz"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        with pytest.warns(UserWarning):
            z.writestr("W_key.npy", members["W_query.npy"])
    with pytest.raises(npattn.CheckpointError, match=r"lists the member\(s\) \['W_key.npy'\] more than once"):
        npattn.load(path)


def _with_index(tmp_path, good, edit):
    members = _members(good)
    index = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    text = edit(index)
    buffer = io.BytesIO()
    np.save(buffer, np.array(text if isinstance(text, str) else json.dumps(index)))
    path = tmp_path / "edited.npz"
    _rezip(path, {**members, "__npattn__.npy": buffer.getvalue()})
    return path


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda h: "{not json", "is not valid JSON"),
        (lambda h: "[" * 100000 + "]" * 100000, "nested too deeply"),
        (lambda h: h.update(version=True), "version True"),
        (lambda h: h.update(version="1"), "version '1'"),
        (lambda h: h.pop("tree"), "has no 'tree'"),
        (lambda h: h.update(tree={"weird": 1}), "corrupt tree entry"),
        (lambda h: h.update(tree={"dict": [["w"]]}), "corrupt dict entry"),
        (lambda h: h.update(tree={"array": "W_key", "scalar": "yes"}), "corrupt tree entry"),
        (lambda h: h["tree"]["dict"][1][1].update(scalar=True), "marks member 'W_key' of shape (3, 2)"),
        (lambda h: h.update({"class": 5}), "'class' must be a string"),
        (lambda h: h.update(config=[1]), "'config' must be an object"),
    ],
)
def test_a_malformed_index_says_what_is_wrong(tmp_path, good, edit, message):
    path = _with_index(tmp_path, good, edit)
    for read in (npattn.load, npattn.load_metadata):
        with pytest.raises(npattn.CheckpointError, match=re.escape(message)) as info:
            read(path)
        assert "contains pickled data" not in str(info.value)


@pytest.mark.parametrize(
    "data", [b"hello\n", b"\x1f\x8b\x08\x00" + bytes(50), b"\x80\x05" + bytes(range(40)), b""], ids=str
)
def test_only_a_pickle_is_said_to_contain_pickled_data(tmp_path, data):
    path = tmp_path / "x.npz"
    path.write_bytes(data)
    with pytest.raises(npattn.CheckpointError, match="not a zip archive") as info:
        npattn.load(path)
    assert "contains pickled data" not in str(info.value)


def test_safetensors_refuses_what_it_cannot_hold_and_keeps_0d(tmp_path):
    pytest.importorskip("safetensors")
    path = tmp_path / "m.safetensors"
    npattn.save({"x": np.array(2.0), "y": np.ones((2, 3), dtype=">f4")}, path)
    loaded = npattn.load(path)
    assert loaded["x"].shape == () and loaded["y"].dtype == np.float32
    for state, message in [
        ({"__metadata__": np.ones(1)}, "reserved"),
        ({"a\udc80": np.ones(1)}, "not UTF-8"),
        ({"c": np.ones(2, complex)}, "dtype complex128"),
        ({"step": 3}, "cannot save 'step' to .safetensors: it is of type int, not a NumPy array"),
        ({"s": np.float64(2.0)}, "it is of type float64, not a NumPy array"),
        ({"o": {"w": np.ones(2)}}, r"save nested state .* to a .npz path \(got 'o': dict\)"),
    ]:
        with pytest.raises(npattn.CheckpointError, match=message):
            npattn.save(state, path)
    from safetensors.numpy import save_file

    save_file({"w": np.ones(2)}, str(path), metadata={"npattn": "{bad json"})
    with pytest.raises(npattn.CheckpointError, match="'npattn' metadata is not the JSON object"):
        npattn.load(path)
    save_file({"W_query.weight": np.ones(2)}, str(path), metadata={"format": "pt"})  # PyTorch's: loads
    assert list(npattn.load(path)) == ["W_query.weight"]


def test_members_that_are_not_npy_files_are_refused(tmp_path, good):
    """'W_key' and 'W_key.npy' would both be read as the array W_key: neither is trusted."""
    members = _members(good)
    path = tmp_path / "odd.npz"
    _rezip(path, {**members, "W_key": members["W_query.npy"]})
    lacks = "member 'W_key' is an .npy array, but its name lacks the '.npy' suffix"
    with pytest.raises(npattn.CheckpointError, match=re.escape(lacks)):
        npattn.load(path)
    with pytest.raises(npattn.CheckpointError, match=r"the folder '.*good.npz' is a file, not a folder"):
        npattn.save({"w": np.ones(1)}, good / "x.npz")


# ---------------------------------------------------------------------------------------------
# load_metadata(...)["config"] rebuilds the saved module: cls(**config) takes its state dict


def _rebuildable_modules():
    from npattn.nn import gpt, layers, transformer

    cfg = dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.1, qkv_bias=True)
    return [
        npattn.SelfAttention_v1(3, 2, rng=0),
        npattn.SelfAttention_v2(3, 2, qkv_bias=True, rng=0),
        npattn.CausalAttention(3, 2, 5, 0.1, True, rng=0),
        npattn.MultiHeadAttentionWrapper(3, 2, 5, 0.1, 2, True, rng=0),
        npattn.MultiHeadAttention(3, 4, 5, 0.1, 2, True, rng=0),
        transformer.Embedding(5, 3, rng=0),
        transformer.LayerNorm(4),
        transformer.GELU(),
        transformer.FeedForward(cfg, rng=0),
        gpt.TransformerBlock(cfg, rng=0),
        npattn.GPTModel(cfg, rng=0),
        layers.Linear(3, 2, False, rng=0),
        layers.Dropout(0.2),
    ]


def test_every_module_class_is_rebuilt_from_its_saved_config(tmp_path):
    import inspect

    from npattn.nn import attention, gpt, layers, transformer

    modules = _rebuildable_modules()
    public = {
        cls
        for mod in (attention, transformer, gpt, layers)
        for name, cls in vars(mod).items()
        if isinstance(cls, type) and issubclass(cls, npattn.Module) and cls.__module__ == mod.__name__
        and not name.startswith("_")
    }  # fmt: skip
    assert public <= {type(m) for m in modules}, public - {type(m) for m in modules}
    for module in modules:
        path = tmp_path / "m.npz"
        npattn.save(module, path)
        config = npattn.load_metadata(path)["config"]
        required = [p.name for p in list(inspect.signature(type(module).__init__).parameters.values())[1:]
                    if p.kind is p.POSITIONAL_OR_KEYWORD]  # fmt: skip
        assert list(config) == required, type(module).__name__
        rebuilt = type(module)(**config)
        rebuilt.load_state_dict(npattn.load(path))
        assert repr(rebuilt) == repr(module)
