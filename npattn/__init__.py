"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward; tests/test_layout.py enforces it):
    errors, _checks          exceptions; argument validation
    random, book             PyTorch's CPU random streams (TorchGenerator); the book's inputs
    nn.functional            the stage forward/backward pairs: the math, written once
    kernels                  stages 2-5 three ways (reference, fused, tiled) and the dispatcher
    nn                       Parameter/Module, Linear/Dropout, losses, the chapter-3 classes
    optim, gradcheck         SGD/Adam/AdamW; finite-difference gradient checks
    train                    the fit loop, L-BFGS, tasks, checkpoints; text, tokenizers and the
                             chapter-5 loop that trains a GPT (train_lm)
    debug                    predict, trace, row checks, compare, diagnose, user-code checks
    cli                      the ``npattn`` command
See docs/architecture.md.
"""
# ruff: noqa: E402 (the Ctrl-C guard of the command line is set before the package's imports)

import _signal  # the C module: `import signal` builds its enums first, a window of its own (~10 ms)
import os as _os
import sys as _sys

from npattn import _interrupts  # os and sys only: the Ctrl-C guard below is set before anything loads


def _module_run(options: list[str]) -> str | None:
    """The module Python's options ``options`` run with ``-m`` (``-m npattn``, ``-mnpattn``, ``-Bm npattn``,
    ``-W error -m npattn``), or None: read as Python reads them, up to the first word that is no option."""
    words = iter(options)
    for word in words:
        if word == "--" or not word.startswith("-") or word == "-":
            return None
        if word.startswith("--"):
            if word == "--check-hash-based-pycs":
                next(words, None)
            continue
        for at, flag in enumerate(word[1:], start=1):
            if flag in "cmWX":  # the option's value: the rest of the word, or the next word
                value = word[at + 1 :] or next(words, None)
                if flag == "m":
                    return value
                if flag == "c":
                    return None
                break
    return None


def _started_as_command() -> bool:
    """True while ``python -m npattn`` (Python sets ``sys.argv[0]`` to ``"-m"`` while it locates the
    package) or the ``npattn`` script imports the package; never for ``import npattn`` in a program."""
    if _sys.argv[:1] == ["-m"]:
        return _module_run(list(getattr(_sys, "orig_argv", []))[1:]) in ("npattn", "npattn.__main__")
    script = getattr(_sys.modules.get("__main__"), "__file__", None) or ""
    name = _os.path.splitext(_os.path.basename(script))[0]
    return name in ("npattn", "npattn-script") and _os.path.basename(_sys.argv[0] or "").startswith("npattn")


_guarded = False
# the import takes ~0.3 s: a Ctrl-C in it is the command's (one line, exit 130), not a traceback
# (npattn._interrupts.exit_while_starting).
# A SIGINT ignored at the start (a background job of a script, `npattn train ... &`) is taken over
# too, as the command line takes it over once it runs (npattn.cli.main.entry): otherwise a Ctrl-C
# in the import was dropped and one after it stopped the run.
if _started_as_command() and _signal.getsignal(_signal.SIGINT) in (_signal.default_int_handler, _signal.SIG_IGN):
    try:
        _signal.signal(_signal.SIGINT, _interrupts.exit_while_starting)
        _guarded = True
    except (ValueError, OSError):  # not the main thread, or no signals here
        pass



def _drop_the_current_folder() -> None:
    """Under ``python -m npattn``, search modules as the ``npattn`` script does: without the current folder.

    Python's ``-m`` puts the current folder first on ``sys.path``, so a ``signal.py`` or ``numpy.py``
    there would be imported in place of Python's or NumPy's own by the imports below (a traceback
    from the user's file before npattn could speak). ``python -P`` already leaves it out; npattn's
    own modules are found through the package, and ``npattn check FILE.py:NAME`` puts the file's
    folder on the path for the file's own imports. A file named ``npattn.py`` there is still run
    instead of npattn: Python finds it before this package is imported.
    """
    if not _started_as_command() or _sys.argv[:1] != ["-m"] or not _sys.path:  # the script: no folder put there
        return
    if getattr(_sys.flags, "safe_path", False) or _sys.flags.isolated:  # -P, -I: no current folder was put there
        return
    try:
        here = _os.getcwd()
    except OSError:  # the current folder was removed: Python put its old name there, if anything
        return
    if _sys.path[0] in (here, ""):
        del _sys.path[0]


_drop_the_current_folder()

from npattn import _compat, debug, kernels, nn, optim, random, train
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.debug import (
    CATALOGUE,
    CheckReport,
    Comparison,
    Diagnosis,
    Mistake,
    PipelineGradcheck,
    RowCheck,
    ShapeCheck,
    ShapePrediction,
    Trace,
    check_attention,
    check_rows,
    check_rows_of,
    check_shapes,
    compare,
    diagnose,
    gradcheck_pipeline,
    predict_shapes,
    predict_shapes_for,
    trace,
    weights_of,
)
from npattn.errors import (
    BackwardError,
    CheckpointError,
    ConfigError,
    DTypeError,
    GradcheckError,
    NpattnError,
    ShapeError,
    StateDictError,
    TrainingError,
)
from npattn.gradcheck import GradcheckReport, TensorCheck, gradcheck, gradcheck_stage
from npattn.kernels import fused, tiled
from npattn.nn import (
    GELU,
    GPT_CONFIG_124M,
    CausalAttention,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    FeedForward,
    GPTModel,
    IncompatibleKeys,
    LayerNorm,
    Linear,
    Module,
    ModuleList,
    MSELoss,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    Parameter,
    SelfAttention_v1,
    SelfAttention_v2,
    Sequential,
    TransformerBlock,
    functional,
    generate_text_simple,
    losses,
)
from npattn.random import TorchGenerator, default_generator, initial_seed, manual_seed, rand, randn, seed
from npattn.train import (
    BPETokenizer,
    CharTokenizer,
    GPTDatasetV1,
    History,
    LMHistory,
    calc_loss_batch,
    calc_loss_loader,
    create_dataloader_v1,
    default_corpus,
    fit,
    fit_lbfgs,
    generate,
    load,
    load_metadata,
    run_lm,
    save,
    tasks,
    text_to_token_ids,
    token_ids_to_text,
    train_lm,
    train_task,
)
from npattn.train.lm import evaluate_model, generate_and_print_sample

_compat.register_old_paths()  # npattn 0.1's flat module paths (npattn.functional, ...) still import

# When guarded, the guard stays until the command line sets its own handler (npattn.cli.main.entry):
# ``python -m npattn`` still imports the command line's modules after this line, and a Ctrl-C there
# printed Python's traceback.

__version__ = "0.1.0"

__all__ = [
    "BOOK_TOKENS",
    "CATALOGUE",
    "GELU",
    "GPT_CONFIG_124M",
    "BPETokenizer",
    "BackwardError",
    "CausalAttention",
    "CharTokenizer",
    "CheckReport",
    "CheckpointError",
    "Comparison",
    "ConfigError",
    "CrossEntropyLoss",
    "DTypeError",
    "Diagnosis",
    "Dropout",
    "Embedding",
    "FeedForward",
    "GPTDatasetV1",
    "GPTModel",
    "GradcheckError",
    "GradcheckReport",
    "History",
    "IncompatibleKeys",
    "LMHistory",
    "LayerNorm",
    "Linear",
    "MSELoss",
    "Mistake",
    "Module",
    "ModuleList",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "NpattnError",
    "Parameter",
    "PipelineGradcheck",
    "RowCheck",
    "SelfAttention_v1",
    "SelfAttention_v2",
    "Sequential",
    "ShapeCheck",
    "ShapeError",
    "ShapePrediction",
    "StateDictError",
    "TensorCheck",
    "TorchGenerator",
    "Trace",
    "TrainingError",
    "TransformerBlock",
    "__version__",
    "book_batch",
    "book_inputs",
    "calc_loss_batch",
    "calc_loss_loader",
    "check_attention",
    "check_rows",
    "check_rows_of",
    "check_shapes",
    "compare",
    "create_dataloader_v1",
    "debug",
    "default_corpus",
    "default_generator",
    "diagnose",
    "evaluate_model",
    "fit",
    "fit_lbfgs",
    "functional",
    "fused",
    "generate",
    "generate_and_print_sample",
    "generate_text_simple",
    "gradcheck",
    "gradcheck_pipeline",
    "gradcheck_stage",
    "initial_seed",
    "kernels",
    "load",
    "load_metadata",
    "losses",
    "manual_seed",
    "nn",
    "optim",
    "predict_shapes",
    "predict_shapes_for",
    "rand",
    "randn",
    "random",
    "run_lm",
    "save",
    "seed",
    "tasks",
    "text_to_token_ids",
    "tiled",
    "token_ids_to_text",
    "trace",
    "train",
    "train_lm",
    "train_task",
    "weights_of",
]
