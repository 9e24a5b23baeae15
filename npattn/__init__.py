"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward; tests/test_layout.py enforces it):
    errors, _checks          exceptions; argument validation
    random, book             PyTorch's CPU random streams (TorchGenerator); the book's inputs
    nn.functional            the stage forward/backward pairs: the math, written once
    kernels                  stages 2-5 three ways (reference, fused, tiled) and the dispatcher
    nn                       Parameter/Module, Linear/Dropout, losses, the chapter-3 classes
    optim, gradcheck         SGD/Adam/AdamW; finite-difference gradient checks
    train                    the fit loop, L-BFGS, tasks, checkpoints
    debug                    predict, trace, row checks, compare, diagnose, user-code checks
    cli                      the ``npattn`` command
See docs/architecture.md.
"""

import sys as _sys

from npattn import debug, kernels, nn, optim, random, train
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
    CausalAttention,
    CrossEntropyLoss,
    Dropout,
    IncompatibleKeys,
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
    functional,
    losses,
)
from npattn.random import TorchGenerator, default_generator, initial_seed, manual_seed, rand, randn, seed
from npattn.train import History, fit, fit_lbfgs, load, load_metadata, save, tasks, train_task

# The flat module paths of npattn 0.1 stay importable (``from npattn.functional import ...``,
# ``import npattn.tasks``): each is the module, or package, that now holds its contents.
_OLD_PATHS = {
    "functional": "npattn.nn.functional",
    "module": "npattn.nn.module",
    "layers": "npattn.nn.layers",
    "attention": "npattn.nn.attention",
    "losses": "npattn.nn.losses",
    "fused": "npattn.kernels.fused",
    "tiled": "npattn.kernels.tiled",
    "tasks": "npattn.train.tasks",
    "checkpoint": "npattn.train.checkpoint",
    "diagnose": "npattn.debug.diagnose",
    "stagecheck": "npattn.debug.stagecheck",
    "usercode": "npattn.debug.usercode",
    "trace": "npattn.debug",
}
for _old, _new in _OLD_PATHS.items():
    _sys.modules.setdefault(f"npattn.{_old}", _sys.modules[_new])

__version__ = "0.1.0"

__all__ = [
    "BOOK_TOKENS",
    "CATALOGUE",
    "BackwardError",
    "CausalAttention",
    "CheckReport",
    "CheckpointError",
    "Comparison",
    "ConfigError",
    "CrossEntropyLoss",
    "DTypeError",
    "Diagnosis",
    "Dropout",
    "GradcheckError",
    "GradcheckReport",
    "History",
    "IncompatibleKeys",
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
    "__version__",
    "book_batch",
    "book_inputs",
    "check_attention",
    "check_rows",
    "check_rows_of",
    "check_shapes",
    "compare",
    "debug",
    "default_generator",
    "diagnose",
    "fit",
    "fit_lbfgs",
    "functional",
    "fused",
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
    "save",
    "seed",
    "tasks",
    "tiled",
    "trace",
    "train",
    "train_task",
    "weights_of",
]
