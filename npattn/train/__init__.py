"""``npattn.train``: training without PyTorch.

    loop.py         fit: the PyTorch training loop with backward done by hand, and its History
    lbfgs.py        fit_lbfgs: SciPy's L-BFGS-B on the hand-derived gradients
    tasks.py        small tasks to learn (teacher-student, selective copy)
    checkpoint.py   safe checkpoint files (.npz with a JSON index; loading bounded by the file)
    safetensors_io.py  the .safetensors side of checkpoints
    atomic.py       save targets checked (no directories or devices) and written atomically
    command.py      train_task (checkpointed, resumable runs) and ``npattn train``
"""

from npattn.train import checkpoint, tasks
from npattn.train.checkpoint import load, load_metadata, save
from npattn.train.command import train_task
from npattn.train.lbfgs import fit_lbfgs
from npattn.train.loop import History, fit

__all__ = ["History", "checkpoint", "fit", "fit_lbfgs", "load", "load_metadata", "save", "tasks", "train_task"]
