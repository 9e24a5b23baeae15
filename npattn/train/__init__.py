"""``npattn.train``: training without PyTorch.

    loop.py         fit: the PyTorch training loop with backward done by hand, and its History
    lbfgs.py        fit_lbfgs: SciPy's L-BFGS-B on the hand-derived gradients
    tasks.py        small tasks to learn (teacher-student, selective copy)
    checkpoint.py   safe checkpoint files (.npz with a JSON index; loading bounded by the file)
    safetensors_io.py  the .safetensors side of checkpoints
    atomic.py       save targets checked (no directories or devices) and written atomically
    saveguard.py    a run's save path watched between its writes (never replacing a file it did not write)
    figures.py      --plot targets checked before any work; figures written atomically
    command.py      train_task (checkpointed, resumable runs) and ``npattn train``
    tokenizers.py   characters, a byte-level BPE trained on the text, GPT-2's through tiktoken
    bpe.py, tokenizer_checks.py  the byte-level BPE (split pattern, merges, BPETokenizer); the
                    text and id checks every tokenizer shares
    tokenizer_files.py  tokenizers as JSON (files, checkpoint entries), read as untrusted input
    text.py         the default corpus, the book's sliding windows (GPTDatasetV1), seeded batches
    generate.py     the book's chapter-5 generate: greedy, temperature, top-k, eos
    lm.py           the book's chapter-5 loop: calc_loss_batch, calc_loss_loader, train_lm
    lm_history.py   LMHistory (a run's losses, samples and counters, read back checked), progress_line
    lm_run.py       a whole language-model run from settings, with checkpoints (``npattn train --task lm``)
    lm_state.py, lm_continue.py, lm_report.py  a run's arrays and dropout streams; the checks of a
                    continued history; the run's header and loss plot
    checkpoint_index.py, checkpoint_target.py, runsave.py  the JSON index (checked by save and load
                    alike); what a run's --save may replace; a run's saves through its SaveGuard
    history.py, resume.py  a run's record, read back checked; a resume's settings, one check
"""

from npattn.train import checkpoint, tasks
from npattn.train.checkpoint import load, load_metadata, save
from npattn.train.command import OPTIMIZERS, run_train_command, train_task
from npattn.train.generate import generate
from npattn.train.lbfgs import fit_lbfgs
from npattn.train.lm import LMHistory, calc_loss_batch, calc_loss_loader, evaluate_model, train_lm
from npattn.train.lm_run import LMSettings, run_lm
from npattn.train.loop import Batches, History, fit, progress_header, progress_line
from npattn.train.text import DataLoader, GPTDatasetV1, create_dataloader_v1, default_corpus, read_text, split_train_val
from npattn.train.tokenizer_files import load_tokenizer, save_tokenizer, tokenizer_from_dict
from npattn.train.tokenizers import (
    BPETokenizer,
    CharTokenizer,
    gpt2_tokenizer,
    text_to_token_ids,
    token_ids_to_text,
    train_tokenizer,
)

__all__ = [
    "OPTIMIZERS",
    "BPETokenizer",
    "Batches",
    "CharTokenizer",
    "DataLoader",
    "GPTDatasetV1",
    "History",
    "LMHistory",
    "LMSettings",
    "calc_loss_batch",
    "calc_loss_loader",
    "checkpoint",
    "create_dataloader_v1",
    "default_corpus",
    "evaluate_model",
    "fit",
    "fit_lbfgs",
    "generate",
    "gpt2_tokenizer",
    "load",
    "load_metadata",
    "load_tokenizer",
    "progress_header",
    "progress_line",
    "read_text",
    "run_lm",
    "run_train_command",
    "save",
    "save_tokenizer",
    "split_train_val",
    "tasks",
    "text_to_token_ids",
    "token_ids_to_text",
    "tokenizer_from_dict",
    "train_lm",
    "train_task",
    "train_tokenizer",
]
