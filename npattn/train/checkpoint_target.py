"""What a training run's save path may hold before the run starts: nothing (no file, or an empty
one), or a checkpoint of an npattn training run (the one it resumes, its own earlier output, another
run's). Anything else (an .npz that ``np.savez`` wrote, a model saved with ``npattn.save``, a text
file, ...) is someone's data that the run's first save would replace: ``check_run_file`` refuses it
before the first step. Only the file's checked index is read (bounded by the file's size, never
unpickled), as ``npattn.load_metadata`` reads it.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

from npattn.errors import CheckpointError
from npattn.train.atomic import as_path, resolved
from npattn.train.checkpoint import load
from npattn.train.checkpoint_index import check_index_sha256
from npattn.train.digest import DIGEST_KEY, verified
from npattn.train.figures import check_replaceable
from npattn.train.npz_reader import Npz

__all__ = ["RUN_KEYS", "check_outputs", "check_run_file", "foreign_content"]

RUN_KEYS = ("run", "model", "optimizer", "history", DIGEST_KEY)  # what every run checkpoint holds at its top


def _top_keys(tree: Any) -> list[Any]:
    return [key for key, _ in tree["dict"]] if isinstance(tree, dict) and "dict" in tree else []


def foreign_content(path: str) -> str | None:
    """None if ``path`` (an existing regular file, or nothing) holds nothing or a checkpoint of an
    npattn training run; else what it holds, the end of a sentence ("it holds ...")."""
    try:
        if os.path.getsize(path) == 0:
            return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"a file npattn cannot read ({exc.strerror or exc})"
    try:
        npz = Npz(path)
        with npz.zip:
            header, _ = npz.header()
        check_index_sha256(header, path)
    except CheckpointError as exc:
        return f"a file that is not an npattn checkpoint ({str(exc).replace(repr(path), 'the file', 1)})"
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, KeyError, UnicodeDecodeError, RecursionError,
            NotImplementedError) as exc:  # fmt: skip
        return f"a file that is not an npattn checkpoint ({type(exc).__name__}: {exc})"
    keys = _top_keys(header["tree"])
    if all(key in keys for key in RUN_KEYS):
        try:  # a run's checkpoint is what a run wrote: its digest must match its entries (as a resume checks)
            verified(load(path), path)
        except CheckpointError as exc:
            why = str(exc).replace(repr(path), "the file", 1)
            return f"a file with a training run's entries that no run wrote as it is ({why})"
        return None
    shown = ", ".join(map(str, keys[:5])) + (", ..." if len(keys) > 5 else "")
    of = f"a {header['class']}" if isinstance(header.get("class"), str) else "a state dict"
    return f"an npattn checkpoint of {of} (saved with npattn.save; entries: {shown or 'none'}), not of a training run"


def check_run_file(path: str, name: str | None = None) -> None:
    """Refuse a save target holding anything but nothing or a training run's checkpoint; ``name``:
    the path as the user gave it (``path`` is where it leads), for the message.

    Raises:
        CheckpointError: naming the path, what it holds, and how to proceed; the file is not touched.
    """
    holds = foreign_content(path)
    if holds is not None:
        raise CheckpointError(
            f"--save {name or path!r} already exists and holds {holds}; a run replaces only a checkpoint of an "
            "npattn training run (the one it resumes, or an earlier run's), never another file: remove the file "
            "or choose another save path"
        )


def check_outputs(save: Any, plot: Any = None) -> None:
    """``check_run_file`` of ``save`` and ``figures.check_replaceable`` of ``plot`` (None: no such
    target), each at the file its path leads to (symlinks followed, as the write follows them).

    Raises:
        CheckpointError: either holds a file the run would replace but did not write.
    """
    if save is not None:
        check_run_file(resolved(as_path(save), "checkpoint"), as_path(save))
    if plot is not None:
        check_replaceable(resolved(as_path(plot, "plot path"), "plot"), as_path(plot, "plot path"))
