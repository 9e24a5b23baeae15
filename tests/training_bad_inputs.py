"""Bad inputs of the optimizers, the checkpoints, ``train_task`` and the language-model run, as rows
of tests/test_errors.py's table (entry, what, call, error, fragment). File rows run in a fresh
scratch folder and use relative names, so the messages in docs/errors.md do not depend on where the tests run."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

import npattn
from npattn.optim import SGD, Adam
from npattn.train import fit
from npattn.train.digest import DIGEST_KEY, stamped
from npattn.train.lm import LMHistory
from npattn.train.lm_run import run_lm
from npattn.train.tasks import make_task
from npattn.train.text import create_dataloader_v1, default_corpus, read_text
from npattn.train.tokenizer_files import load_tokenizer, save_tokenizer


def in_scratch(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` run with a fresh empty folder as the working directory."""

    def run() -> Any:
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)
            try:
                return call()
            finally:
                os.chdir(here)

    return run


def _model() -> npattn.Module:
    return npattn.SelfAttention_v1(3, 2, rng=0, dtype=np.float64)


def _stepped(opt_class: type = Adam, **settings: Any) -> tuple[npattn.Module, Any]:
    model = _model()
    opt = opt_class(model.parameters(), lr=0.1, **settings)
    for p in model.parameters():
        p.grad[...] = 1.0
    opt.step()
    return model, opt


def _load_edited(edit: Callable[[dict[str, Any]], Any], opt_class: type = Adam) -> None:
    _, opt = _stepped(opt_class)
    state = opt.state_dict()
    edit(state)
    opt.load_state_dict(state)


def _step_after(edit: Callable[[npattn.Module, Any], Any]) -> None:
    model, opt = _stepped()
    edit(model, opt)
    opt.step()


def _zero_grad_after(edit: Callable[[npattn.Module, Any], Any]) -> None:
    model, opt = _stepped()
    edit(model, opt)
    opt.zero_grad()


def _state_dict_after(edit: Callable[[npattn.Module, Any], Any]) -> None:
    model, opt = _stepped()
    edit(model, opt)
    opt.state_dict()


def _fit_with_a_bad_batch_at(bad: int) -> None:
    model = npattn.SelfAttention_v1(6, 2, rng=1, dtype=np.float64)
    optimizer = npattn.optim.SGD(model.parameters(), lr=0.1)
    fit(model, optimizer, npattn.MSELoss(), lambda s: (np.ones((4, 6, 6 if s < bad else 5)), np.zeros((4, 6, 2))), 5)


def _npy(arr: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, arr)
    return buffer.getvalue()


def _edited_checkpoint(
    header: Callable[[dict[str, Any]], Any] | None = None,
    member: bytes | None = None,
    compression: int = zipfile.ZIP_STORED,
) -> None:
    """Write x.npz: a real checkpoint of {"w": ...} with its index or its member replaced."""
    npattn.save({"w": np.ones((2, 3))}, "good.npz")
    with zipfile.ZipFile("good.npz") as z:
        members = {name: z.read(name) for name in z.namelist()}
    index = json.loads(str(np.load(io.BytesIO(members["__npattn__.npy"]))))
    if header is not None:
        header(index)
        members["__npattn__.npy"] = _npy(np.array(json.dumps(index)))
    if member is not None:
        members["w.npy"] = member
    with zipfile.ZipFile("x.npz", "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def _huge_npy_header() -> bytes:
    """An .npy header that declares 10**12 float64 values, followed by no data at all."""
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


LM_TINY = {
    "tokenizer": "char",
    "context_length": 8,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 1,
    "batch_size": 2,
    "eval_every": 10,
    "eval_iter": 1,
    "sample_tokens": 2,
    "text": "t.txt",
}


def _lm_text(name: str = "t.txt") -> None:
    with open(name, "w", encoding="utf-8") as f:
        f.write(default_corpus()[:3_000])


def _lm_run(**kwargs: Any) -> Any:
    """A tiny language-model run on t.txt (written first) in the working directory."""
    _lm_text()
    given = {**LM_TINY, **kwargs.pop("given", {})}
    return run_lm(given, out=None, **kwargs)


def _lm_resume(edit: Callable[[dict[str, Any]], Any], steps: int = 5) -> Any:
    """Resume a 3-step checkpoint after ``edit`` changed it."""
    _lm_run(given={"steps": 3}, save="run.npz")
    state = npattn.load("run.npz")
    edit(state)
    npattn.save(restamped(state), "run.npz")
    return run_lm({"text": "t.txt", "steps": steps}, resume="run.npz", out=None)


def _task_resume(edit: Callable[[dict[str, Any]], Any], **given: Any) -> Any:
    """Resume a 2-step teacher-student checkpoint after ``edit`` changed it."""
    npattn.train_task("teacher-student", steps=2, save="run.npz")
    state = npattn.load("run.npz")
    edit(state)
    npattn.save(restamped(state), "run.npz")
    return npattn.train_task(steps=4, resume="run.npz", **given)


def _fit(steps: int, **kwargs: Any) -> Any:
    task = make_task("teacher-student")
    model = task.make_model()
    return npattn.fit(model, Adam(model.parameters()), task.criterion, task.batch, steps, **kwargs)


def _read_only(path: str) -> None:
    npattn.save({"a": np.ones(2)}, path)
    os.chmod(path, 0o444)


def swapped_chars(entry: str) -> str:
    """A char tokenizer's JSON with its first two characters swapped: consistent-looking, but every
    token id of those two characters means the other one."""
    state = json.loads(entry)
    chars = state["chars"]
    state["chars"] = chars[1] + chars[0] + chars[2:]
    return json.dumps(state)


def _flipped_directory(path: str) -> None:
    """A checkpoint with one byte flipped in its zip directory (the "version made by" of the first entry)."""
    npattn.save({"w": np.ones(2)}, path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[data.index(b"PK\x01\x02") + 6] ^= 0x5A
    with open(path, "wb") as f:
        f.write(bytes(data))


def _complex_safetensors(path: str) -> None:
    """A .safetensors file with one complex64 tensor 'w' of shape (3,), written by hand."""
    header = json.dumps({"w": {"dtype": "C64", "shape": [3], "data_offsets": [0, 24]}}).encode()
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bytes(24))


def restamped(state: Any) -> Any:
    """An edited run checkpoint's state with its digest recomputed, so that resuming it reaches the
    check an edit is meant to meet (without it, every edit stops at the digest)."""
    return stamped(state) if isinstance(state, dict) and DIGEST_KEY in state else state


def edited_copy(path: Any, folder: Any, edit: Callable[[dict[str, Any]], Any]) -> Any:
    """The run checkpoint at ``path`` after ``edit`` changed it (its digest recomputed), saved as
    ``folder``/edited.npz."""
    state = npattn.load(path)
    edit(state)
    edited = os.path.join(folder, "edited.npz")
    npattn.save(restamped(state), edited)
    return edited


def _lm_history(**entries: Any) -> Any:
    return LMHistory.from_state_dict({**LMHistory().state_dict(), **entries})


def training_bad_inputs() -> list[tuple[str, str, Callable[[], Any], type[Exception], str]]:
    """Rows for the optimizers, checkpoints and train_task."""
    ckpt, cfg, sde = npattn.CheckpointError, npattn.ConfigError, npattn.StateDictError
    group_lr = "parameter group 0: Invalid learning rate"
    return [
        (
            "Adam(params)",
            "a Module instead of model.parameters()",
            lambda: Adam(_model()),
            cfg,
            "pass model.parameters()",
        ),
        (
            "SGD(params)",
            "the same Parameter twice (was updated twice per step)",
            lambda: SGD([_model().W_query] * 2),
            cfg,
            "listed twice in one group",
        ),
        (
            "Adam(params, foreach=)",
            "foreach=True, PyTorch's switch npattn has no use for (was a TypeError; None and False are accepted)",
            lambda: Adam(_model().parameters(), foreach=True),
            cfg,
            "Adam: foreach=True is not supported (npattn updates one parameter at a time, which is PyTorch's "
            "foreach=False); leave it at None or False",
        ),
        (
            "Adam(params, decoupled_weight_decay=)",
            "decoupled_weight_decay=True (was a TypeError)",
            lambda: Adam(_model().parameters(), decoupled_weight_decay=True),
            cfg,
            "use AdamW, which is Adam with decoupled weight decay",
        ),
        (
            "Adam(params, amsgrad=)",
            "amsgrad='no' (was True)",
            lambda: Adam(_model().parameters(), amsgrad="no"),
            cfg,
            "'no'",
        ),
        (
            "Adam([{'params': ..., 'lr': ...}])",
            "a group's lr=-1 (was accepted)",
            lambda: Adam([{"params": _model().parameters(), "lr": -1}]),
            cfg,
            group_lr,
        ),
        (
            "Adam([{'params': ..., 'lr': ...}])",
            "a misspelt setting (was ignored)",
            lambda: Adam([{"params": _model().parameters(), "lrr": 0.1}]),
            cfg,
            "unknown setting(s) 'lrr'",
        ),
        (
            "Optimizer.add_param_group(group)",
            "betas=(1.0, 0.9) (was accepted)",
            lambda: Adam([_model().W_query]).add_param_group({"params": [_model().W_key], "betas": (1.0, 0.9)}),
            cfg,
            "Invalid beta parameter at index 0: 1.0",
        ),
        (
            "Optimizer.load_state_dict(sd)",
            "lr=nan (was accepted)",
            lambda: _load_edited(lambda sd: sd["param_groups"][0].update(lr=float("nan"))),
            sde,
            group_lr,
        ),
        (
            "Optimizer.load_state_dict(sd)",
            "a step count of -1",
            lambda: _load_edited(lambda sd: sd["state"][0].update(step=-1)),
            sde,
            "'step' must be an integer >= 1",
        ),
        (
            "Optimizer.load_state_dict(sd)",
            "a negative exp_avg_sq (NaN weights at the next step)",
            lambda: _load_edited(lambda sd: sd["state"][0]["exp_avg_sq"].fill(-1.0)),
            sde,
            "'exp_avg_sq' holds negative values",
        ),
        (
            "Optimizer.load_state_dict(sd)",
            "an SGD state dict into Adam",
            lambda: Adam(_model().parameters()).load_state_dict(_stepped(SGD, momentum=0.9)[1].state_dict()),
            sde,
            "lacks the setting(s) 'betas', 'eps'",
        ),
        (
            "Optimizer.step()",
            "a .grad of another shape (was a NumPy broadcasting error after a partial update)",
            lambda: _step_after(lambda m, o: setattr(m.W_value, "grad", np.ones((2, 3)))),
            npattn.ShapeError,
            ".grad has shape (2, 3), the parameter has (3, 2)",
        ),
        (
            "Optimizer.step()",
            "param_groups[0]['lr'] set to NaN",
            lambda: _step_after(lambda m, o: o.param_groups[0].update(lr=float("nan"))),
            cfg,
            group_lr,
        ),
        (
            "Optimizer.step(closure)",
            "a closure that is not a function (was a TypeError)",
            lambda: _stepped()[1].step("loss"),
            cfg,
            "step(closure): expected a function that recomputes and returns the loss, got str",
        ),
        (
            "Optimizer.step()",
            "amsgrad switched on after steps were taken (was 'expected the buffers')",
            lambda: _step_after(lambda m, o: o.param_groups[0].update(amsgrad=True)),
            sde,
            "amsgrad was switched on after steps were taken without it",
        ),
        (
            "Optimizer.load_state_dict(sd)",
            "Parameters in place of indices (was every array printed)",
            lambda: _load_edited(lambda sd: sd["param_groups"][0].update(params=list(_model().parameters()))),
            sde,
            "'params' must list int indices (as state_dict() writes), got Parameter of shape (3, 2)",
        ),
        (
            "Adam(params, lr=)",
            "a 1-element array (a 0-d array or tensor is its number)",
            lambda: Adam(_model().parameters(), lr=np.array([0.1])),
            cfg,
            "Invalid learning rate: expected a finite number >= 0, got an array of shape (1,) and dtype float64",
        ),
        (
            "Optimizer.step()",
            "a read-only .data",
            lambda: _step_after(lambda m, o: m.W_key.data.setflags(write=False)),
            cfg,
            "its .data is read-only",
        ),
        (
            "npattn.save(obj, path)",
            "path is a directory",
            in_scratch(lambda: (os.mkdir("runs"), npattn.save({"w": np.ones(2)}, "runs"))),
            ckpt,
            "it is a directory",
        ),
        (
            "npattn.save(obj, path)",
            "an int of 5000 digits (was Python's ValueError from JSON)",
            in_scratch(lambda: npattn.save({"w": np.ones(2), "n": 10**5000}, "x.npz")),
            ckpt,
            "cannot save state['n']: an integer of about 5001 digits (at most 4000 digits can be read back",
        ),
        (
            "make_task(name).batch(step, size)",
            "size=10**12 (was NumPy's MemoryError)",
            lambda: make_task("selective-copy").batch(0, size=10**12),
            cfg,
            "SelectiveCopy.batch: size=1000000000000 sequences of 6 tokens do not fit in memory",
        ),
        (
            "save_tokenizer(tokenizer, path)",
            "an object whose to_dict() load_tokenizer refuses (was written over the old file)",
            in_scratch(lambda: save_tokenizer(type("Own", (), {"to_dict": lambda self: {"junk": 1}})(), "tok.json")),
            cfg,
            "save_tokenizer: Own.to_dict() is no description load_tokenizer reads back (not a tokenizer description",
        ),
        (
            "fit(model, optimizer, criterion, batches, steps)",
            "a batch of another d_in at step 3 (was the model's message alone: no step named)",
            lambda: _fit_with_a_bad_batch_at(3),
            npattn.ShapeError,
            "fit: the batch of step 3, batches(3): x: expected last dimension d_in=6",
        ),
        (
            "make_task(name).evaluate(model)",
            "a model of another d_in (was blamed on x)",
            lambda: make_task("selective-copy").evaluate(npattn.SelfAttention_v2(5, 4)),
            npattn.ShapeError,
            "SelectiveCopy.evaluate: the model does not take the task's inputs (d_in=6, x of shape (1000, 6, 6))",
        ),
        (
            "make_task(name).evaluate(model)",
            "a model of another d_out (was blamed on the task's targets)",
            lambda: make_task("selective-copy").evaluate(npattn.SelfAttention_v2(6, 3)),
            npattn.ShapeError,
            "SelectiveCopy.evaluate: the model's output has shape (1000, 6, 3), the task scores shape (1000, 6, 4)",
        ),
        (
            "npattn.save(obj, path, metadata=)",
            "a reserved key (was a file load refused)",
            in_scratch(lambda: npattn.save({"w": np.ones(2)}, "x.npz", metadata={"version": 2})),
            ckpt,
            "reserved",
        ),
        (
            "npattn.save(obj, path, metadata=)",
            "'class' (was reported by load_metadata as the saved class)",
            in_scratch(lambda: npattn.save(_model(), "x.npz", metadata={"class": "GPTModel"})),
            ckpt,
            "metadata keys ['class'] are reserved for the checkpoint's own index",
        ),
        (
            "npattn.save(obj, path)",
            "a path ending in a separator (was written without it)",
            in_scratch(lambda: npattn.save({"a": np.ones(2)}, "x.npz/")),
            ckpt,
            "cannot write checkpoint 'x.npz/': the path ends in a separator (a folder); name a file",
        ),
        (
            "npattn.save(obj, path)",
            "a file without write bits, as root too (was replaced)",
            in_scratch(lambda: (_read_only("x.npz"), npattn.save({"a": np.ones(2)}, "x.npz"))),
            ckpt,
            "cannot write checkpoint 'x.npz': permission denied (the file is read-only)",
        ),
        (
            "npattn.load(path)",
            "a flipped byte in the zip directory (was a NotImplementedError)",
            in_scratch(lambda: (_flipped_directory("x.npz"), npattn.load("x.npz"))),
            ckpt,
            "'x.npz' is truncated, corrupt or not a checkpoint: NotImplementedError: zip file version",
        ),
        (
            "npattn.save(obj, path, metadata=)",
            "a tuple (would come back a list)",
            in_scratch(lambda: npattn.save({"w": np.ones(2)}, "x.npz", metadata={"betas": (0.9, 0.99)})),
            ckpt,
            "(use a list)",
        ),
        (
            "npattn.save(obj, path)",
            "a state that contains itself",
            in_scratch(lambda: (state := {"w": np.ones(2)}, state.update(me=state), npattn.save(state, "x.npz"))),
            ckpt,
            "it contains itself",
        ),
        (
            "npattn.load(path)",
            "a compressed member (a zip bomb)",
            in_scratch(lambda: (_edited_checkpoint(compression=zipfile.ZIP_DEFLATED), npattn.load("x.npz"))),
            ckpt,
            "is compressed",
        ),
        (
            "npattn.load(path)",
            "a member that declares 10**12 values",
            in_scratch(lambda: (_edited_checkpoint(member=_huge_npy_header()), npattn.load("x.npz"))),
            ckpt,
            "declares shape (1000000, 1000000)",
        ),
        (
            "npattn.load(path)",
            "a text file (was 'contains pickled data')",
            in_scratch(lambda: (open("x.npz", "w").write("hello\n"), npattn.load("x.npz"))),
            ckpt,
            "not a zip archive",
        ),
        (
            "npattn.load(path)",
            "version 1.0 in the index (was accepted)",
            in_scratch(lambda: (_edited_checkpoint(header=lambda h: h.update(version=1.0)), npattn.load("x.npz"))),
            ckpt,
            "version 1.0",
        ),
        (
            "npattn.load(path)",
            "an index that names a member twice",
            in_scratch(
                lambda: (
                    _edited_checkpoint(header=lambda h: h.update(tree={"list": [h["tree"]["dict"][0][1]] * 2})),
                    npattn.load("x.npz"),
                )
            ),
            ckpt,
            "more than once",
        ),
        (
            "npattn.load(path)",
            "a directory",
            in_scratch(lambda: (os.mkdir("runs"), npattn.load("runs"))),
            ckpt,
            "is a directory, not a file",
        ),
        (
            "npattn.load(path)",
            "a .safetensors file holding complex64, which save refuses (was returned)",
            in_scratch(lambda: (_complex_safetensors("c.safetensors"), npattn.load("c.safetensors"))),
            ckpt,
            "'c.safetensors': tensor 'w' has dtype C64, which npattn neither saves nor loads (bool, int, uint and "
            "float16/32/64 only)",
        ),
        (
            "train_task(save=)",
            "a folder no one may write (mode 555, as /sys), refused for root too (was found after training)",
            lambda: npattn.train_task(steps=2, save="/sys/npattn-run.npz"),
            ckpt,
            "cannot write checkpoint '/sys/npattn-run.npz': permission denied in the folder '/sys'",
        ),
        (
            "npattn.save(obj, path)",
            "'/dev/stdout', a link into /proc (was: the file standard output went to was replaced)",
            lambda: npattn.save({"w": np.ones(2)}, "/dev/stdout"),
            ckpt,
            "cannot write checkpoint '/dev/stdout': it lies under /proc (it leads to '/proc/self/fd/1')",
        ),
        ("train_task(...)", "steps=-1 (was accepted)", lambda: npattn.train_task(steps=-1), cfg, "steps must be"),
        (
            "train_task(...)",
            "lr='0.1' (was accepted)",
            lambda: npattn.train_task(lr="0.1"),
            cfg,
            "Invalid learning rate",
        ),
        (
            "train_task(...)",
            "save_every without save (was ignored)",
            lambda: npattn.train_task(save_every=5),
            cfg,
            "needs a save path",
        ),
        (
            "train_task(...)",
            "save= a directory (was found after training)",
            in_scratch(lambda: (os.mkdir("runs.npz"), npattn.train_task(save="runs.npz"))),
            ckpt,
            "it is a directory",
        ),
        (
            "train_task(...)",
            "save='run' without .npz (was accepted; run_lm refused it)",
            lambda: npattn.train_task("teacher-student", steps=1, save="run"),
            cfg,
            "--save: a training checkpoint is an .npz file (it holds the optimizer state and the history), got 'run'",
        ),
        (
            "train_task(...)",
            "on_log='x' (was a TypeError at the first log)",
            lambda: npattn.train_task("teacher-student", steps=3, log_every=1, on_log="x"),
            cfg,
            "on_log must be a function on_log(step, loss, history) or None, got str",
        ),
        (
            "train_task(resume=)",
            "optimizer='sgd' on an Adam run (was ignored: the run continued with Adam)",
            in_scratch(lambda: _task_resume(lambda s: None, optimizer="sgd")),
            cfg,
            "--resume continues the stored run; these options differ from it: --optimizer 'sgd' (checkpoint: 'adam')",
        ),
        (
            "train_task(resume=)",
            "a NaN in the history's losses (was accepted)",
            in_scratch(lambda: _task_resume(lambda s: s["history"]["loss"].__setitem__(0, np.nan))),
            ckpt,
            "'run.npz': history.loss[0] is nan; a run records finite values only",
        ),
        (
            "fit(model, optimizer, criterion, batches, steps, start_step=)",
            "start_step past steps (was an empty History)",
            lambda: _fit(5, start_step=10),
            cfg,
            "fit: start_step=10 is past steps=5 (the total step count, not the steps left)",
        ),
        (
            "train_task(resume=)",
            "an emptied optimizer state (was Adam's moments restarting from zero)",
            in_scratch(lambda: _task_resume(lambda s: s["optimizer"].update(state={}))),
            ckpt,
            "optimizer state of parameter 0: 'step' is missing (no state: the moments would restart from zero); "
            "expected 2, the history's step count",
        ),
        (
            "train_task(resume=)",
            "one parameter's optimizer step edited (was accepted)",
            in_scratch(lambda: _task_resume(lambda s: s["optimizer"]["state"][1].update(step=99))),
            ckpt,
            "optimizer state of parameter 1: 'step' is 99; expected 2, the history's step count",
        ),
        (
            "run_lm(given)",
            "an unknown setting (was a TypeError)",
            in_scratch(lambda: _lm_run(given={"foo": 1})),
            cfg,
            "unknown setting(s) foo; LMSettings has text, tokenizer",
        ),
        (
            "run_lm(given)",
            "text=3 (was a TypeError)",
            in_scratch(lambda: _lm_run(given={"text": 3})),
            cfg,
            "text (--text) must be a file path (str) or None, got int",
        ),
        (
            "run_lm(given)",
            "a list (was a TypeError)",
            lambda: run_lm([1]),
            cfg,
            "run_lm's settings must be a dict of LMSettings fields, got list",
        ),
        (
            "run_lm(given, out=)",
            "out='x' (was an AttributeError after the run was set up)",
            lambda: run_lm({}, out="x"),
            cfg,
            "out must be a text stream (with write) or None, got str",
        ),
        (
            "run_lm(given, save_every=)",
            "save_every without save (was ignored)",
            in_scratch(lambda: _lm_run(save_every=1)),
            cfg,
            "save_every=1 needs a save path",
        ),
        (
            "run_lm(given, save=)",
            "a directory (was found after training)",
            in_scratch(lambda: (os.mkdir("runs.npz"), _lm_run(save="runs.npz"))),
            ckpt,
            "cannot write checkpoint 'runs.npz': it is a directory",
        ),
        (
            "run_lm(given)",
            "text= a FIFO (was a hang)",
            in_scratch(lambda: (os.mkfifo("fifo"), _lm_run(given={"text": "fifo"}))),
            cfg,
            "text file 'fifo' is a FIFO (named pipe), not a file",
        ),
        (
            "read_text(path)",
            "/dev/zero (was read without end)",
            lambda: read_text("/dev/zero"),
            cfg,
            "text file '/dev/zero' is a character device, not a file",
        ),
        (
            "run_lm(given)",
            "top_k above the vocabulary (was refused after the model was built)",
            in_scratch(lambda: _lm_run(given={"top_k": 100000})),
            cfg,
            "top_k (--top-k) 100000 exceeds the vocabulary of 57 tokens",
        ),
        (
            "run_lm(given)",
            "a prompt outside the char vocabulary (was refused after the first evaluation)",
            in_scratch(lambda: _lm_run(given={"prompt": "\u2603"})),
            cfg,
            "prompt (--prompt) '\u2603': character '\u2603' (U+2603) is not in",
        ),
        (
            "run_lm(given, resume=)",
            "steps below the checkpoint's (was 'done: 3 steps')",
            in_scratch(lambda: _lm_resume(lambda s: None, steps=1)),
            cfg,
            "steps=1 is below the checkpoint's step count 3",
        ),
        (
            "run_lm(given, resume=)",
            "a stored setting missing (was resumed with the default)",
            in_scratch(lambda: _lm_resume(lambda s: s["run"]["settings"].pop("n_heads"))),
            ckpt,
            "its run settings must hold every LMSettings field; missing ['n_heads']",
        ),
        (
            "run_lm(given, resume=)",
            "history.batch=10**9 (was a StopIteration)",
            in_scratch(lambda: _lm_resume(lambda s: s["history"].update(batch=10**9))),
            ckpt,
            "history.batch 1000000000 is beyond the",
        ),
        (
            "run_lm(given, resume=)",
            "history.global_step=-1 after 3 steps (was accepted)",
            in_scratch(lambda: _lm_resume(lambda s: s["history"].update(global_step=-1))),
            ckpt,
            "history.epoch 0 and history.batch 3 place the run after 3 steps (168 per epoch); expected 0, "
            "the count history.global_step -1 gives",
        ),
        (
            "run_lm(given, resume=)",
            "history.tokens_seen edited (was accepted)",
            in_scratch(lambda: _lm_resume(lambda s: s["history"].update(tokens_seen=5))),
            ckpt,
            "history.tokens_seen is 5; expected 48 (3 steps of 16 tokens)",
        ),
        (
            "run_lm(given, resume=)",
            "an optimizer step that differs from the history's (was accepted)",
            in_scratch(lambda: _lm_resume(lambda s: s["optimizer"]["state"][4].update(step=99))),
            ckpt,
            "optimizer state of parameter 4: 'step' is 99; expected 3, the history's step count",
        ),
        (
            "run_lm(given, resume=)",
            "a tokenizer entry that is not JSON (was a JSONDecodeError)",
            in_scratch(lambda: _lm_resume(lambda s: s.update(tokenizer="{"))),
            ckpt,
            "its tokenizer entry cannot be read",
        ),
        (
            "run_lm(given, resume=)",
            "no model entry (was a KeyError)",
            in_scratch(lambda: _lm_resume(lambda s: s.pop("model"))),
            ckpt,
            "missing ['model']",
        ),
        (
            "LMHistory.from_state_dict(state)",
            "global_step=-5 (was accepted)",
            lambda: _lm_history(global_step=-5),
            ckpt,
            "history.global_step must be a finite integer >= -1, got -5",
        ),
        (
            "LMHistory.from_state_dict(state)",
            "train_losses='abc' (was a ValueError)",
            lambda: _lm_history(train_losses="abc"),
            ckpt,
            "history.train_losses must be a list of numbers, got str",
        ),
        (
            "LMHistory.from_state_dict(state)",
            "epoch='x' (was a ValueError)",
            lambda: _lm_history(epoch="x"),
            ckpt,
            "history.epoch must be a finite integer >= 0, got 'x'",
        ),
        (
            "load_tokenizer(path)",
            "a BPE split pattern other than npattn's GPT-2-style one ('' encoded 'hello world' as []; '(a+)+$' hung)",
            in_scratch(
                lambda: (
                    open("t.json", "w").write('{"kind": "bpe", "merges": [], "pattern": ""}'),
                    load_tokenizer("t.json"),
                )
            ),
            cfg,
            "the split pattern '' is not npattn's GPT-2-style pattern (npattn.train.bpe.GPT2_SPLIT)",
        ),
        (
            "load_tokenizer(path)",
            "a number of 100,000 digits (was Python's advice to raise its limit)",
            in_scratch(
                lambda: (
                    open("t.json", "w").write('{"kind": "char", "chars": ' + "9" * 10**5 + "}"),
                    load_tokenizer("t.json"),
                )
            ),
            ckpt,
            "cannot read the tokenizer file 't.json': it holds a number of over 4300 digits; no tokenizer does",
        ),
        (
            "Optimizer.step()",
            "a group's params replaced by a generator (was 'no parameters' at the second step)",
            lambda: _step_after(lambda m, o: o.param_groups[0].__setitem__("params", iter(list(m.parameters())))),
            cfg,
            "parameter group 0: 'params' is a generator or iterator, which one pass uses up",
        ),
        (
            "load_tokenizer(path)",
            "a JSON list (was: kind 'list')",
            in_scratch(lambda: (open("t.json", "w").write("[1, 2]"), load_tokenizer("t.json"))),
            cfg,
            "not a tokenizer description: it must be a JSON object such as {\"kind\": \"char\", ...}, got a list",
        ),
        (
            "load_tokenizer(path)",
            "/dev/zero (was read until memory ran out)",
            lambda: load_tokenizer("/dev/zero"),
            ckpt,
            "tokenizer file '/dev/zero' is a character device, not a file",
        ),
        (
            "load_tokenizer(path)",
            "a bpe description without 'pattern' (was the KeyError's text)",
            in_scratch(
                lambda: (open("t.json", "w").write('{"kind": "bpe", "merges": []}'), load_tokenizer("t.json"))
            ),
            cfg,
            "malformed bpe tokenizer description: the key(s) 'pattern' are missing",
        ),
        (
            "save_tokenizer(tokenizer, path)",
            "the name 'bpe' (was an AttributeError)",
            in_scratch(lambda: save_tokenizer("bpe", "t.json")),
            cfg,
            "save_tokenizer expects a tokenizer",
        ),
        (
            "read_text(path)",
            "a UTF-16 file (was a hint to convert from Latin-1)",
            in_scratch(lambda: (open("u.txt", "wb").write("caf\u00e9".encode("utf-16")), read_text("u.txt"))),
            cfg,
            "it starts with a UTF-16 byte-order mark: convert it first, e.g. iconv -f utf-16 -t utf-8",
        ),
        (
            "read_text(path)",
            "ASCII text in UTF-16 without a byte-order mark (was read, a NUL between every two characters)",
            in_scratch(lambda: (open("u.txt", "wb").write("every word".encode("utf-16-le")), read_text("u.txt"))),
            cfg,
            "as UTF-16LE text without a byte-order mark does: convert it first, e.g. iconv -f utf-16le -t utf-8",
        ),
        (
            "read_text(path)",
            "UTF-8 text holding a NUL byte (was read)",
            in_scratch(lambda: (open("u.txt", "wb").write(b"abc\0def"), read_text("u.txt"))),
            cfg,
            "it holds NUL bytes (the first at offset 3), which no text file holds",
        ),
        (
            "run_lm(given, save=)",
            "the text file itself (was the corpus replaced by the checkpoint)",
            in_scratch(lambda: (_lm_text("t.npz"), _lm_run(given={"text": "t.npz"}, save="t.npz"))),
            cfg,
            "save (--save) 't.npz' is the file the run reads as text (--text) 't.npz'",
        ),
        (
            "run_lm(given, resume=)",
            "a char tokenizer with two characters swapped (was accepted: every id meant another character)",
            in_scratch(lambda: _lm_resume(lambda s: s.update(tokenizer=swapped_chars(s["tokenizer"])))),
            ckpt,
            "its tokenizer differs from the char tokenizer the text and settings build",
        ),
        (
            "create_dataloader_v1(txt, tokenizer=)",
            "tokenizer='gpt2' (was a LookupError)",
            lambda: create_dataloader_v1("some text", tokenizer="gpt2"),
            cfg,
            "tokenizer must be a tokenizer with encode and decode",
        ),
        (
            "train_lm(..., tokenizer)",
            "tokenizer=None (was an AttributeError)",
            lambda: npattn.train_lm(None, None, None, None, 1, 1, 1, "The", None),
            cfg,
            "got NoneType",
        ),
        (
            "Optimizer.zero_grad()",
            "a group's params set to one Parameter (was a TypeError; step() updated it alone)",
            lambda: _zero_grad_after(lambda m, o: o.param_groups[0].__setitem__("params", m.W_query)),
            cfg,
            "Adam.zero_grad: parameter group 0: 'params' is a single Parameter, expected a list of them: assign [p]",
        ),
        (
            "Optimizer.state_dict()",
            "a group's params listing one Parameter twice (was a state dropping the others' moments)",
            lambda: _state_dict_after(lambda m, o: o.param_groups[0].__setitem__("params", [m.W_key, m.W_key])),
            cfg,
            "Adam.state_dict: parameter group 0: the same Parameter is listed twice in one group (positions 0 and 1)",
        ),
    ]
