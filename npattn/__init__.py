"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward):
    errors, _checks, random, functional    stage forward/backward pairs, validation, PyTorch's RNG
    fused, tiled, kernels                  fast paths of stages 2-5 and the dispatcher between them
    module, layers, attention              Parameter/Module, Linear/Dropout, the chapter-3 classes
    losses, optim, checkpoint, tasks       training pieces: PyTorch-named losses and optimizers, safe files
    gradcheck, train, demo                 tools on top of modules
    trace, diagnose, stagecheck, usercode  debugging tools: shapes, traces, row check, bug fingerprints
    cli                                    the `npattn` command
"""

from npattn import functional, fused, kernels, losses, optim, tasks, tiled
from npattn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.checkpoint import load, load_metadata, save
from npattn.diagnose import CATALOGUE, Diagnosis, Mistake, diagnose
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
from npattn.layers import Dropout, Linear
from npattn.losses import CrossEntropyLoss, MSELoss
from npattn.module import IncompatibleKeys, Module, ModuleList, Parameter
from npattn.random import TorchGenerator
from npattn.stagecheck import PipelineGradcheck, gradcheck_pipeline
from npattn.trace import (
    Comparison,
    RowCheck,
    ShapeCheck,
    ShapePrediction,
    Trace,
    check_rows,
    check_rows_of,
    check_shapes,
    compare,
    predict_shapes,
    predict_shapes_for,
    trace,
    weights_of,
)
from npattn.train import History, fit, fit_lbfgs, train_task
from npattn.usercode import CheckReport, check_attention

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
    "diagnose",
    "fit",
    "fit_lbfgs",
    "functional",
    "fused",
    "gradcheck",
    "gradcheck_pipeline",
    "gradcheck_stage",
    "kernels",
    "load",
    "load_metadata",
    "losses",
    "optim",
    "predict_shapes",
    "predict_shapes_for",
    "save",
    "tasks",
    "tiled",
    "trace",
    "train_task",
    "weights_of",
]
