"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward):
    errors, _checks, random, functional   stage forward/backward pairs, validation, PyTorch's RNG
    module, attention                      Parameter/Module and the chapter-3 classes
    losses, optim, checkpoint, tasks       training tools: PyTorch-named losses and optimizers, safe files
    gradcheck, train, demo, cli            tools on top of modules
"""

# Training: losses, optimizers, checkpoints, tasks and the fit loop.
from npattn import functional, losses, optim, tasks
from npattn.attention import SelfAttention_v1
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.checkpoint import load, load_metadata, save
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
from npattn.losses import CrossEntropyLoss, MSELoss
from npattn.module import IncompatibleKeys, Module, ModuleList, Parameter
from npattn.random import TorchGenerator
from npattn.train import History, fit, fit_lbfgs, train_task

__version__ = "0.1.0"

__all__ = [
    "BOOK_TOKENS",
    "BackwardError",
    "CheckpointError",
    "ConfigError",
    "CrossEntropyLoss",
    "DTypeError",
    "GradcheckError",
    "GradcheckReport",
    "History",
    "IncompatibleKeys",
    "MSELoss",
    "Module",
    "ModuleList",
    "NpattnError",
    "Parameter",
    "SelfAttention_v1",
    "ShapeError",
    "StateDictError",
    "TensorCheck",
    "TorchGenerator",
    "TrainingError",
    "__version__",
    "book_batch",
    "book_inputs",
    "fit",
    "fit_lbfgs",
    "functional",
    "gradcheck",
    "gradcheck_stage",
    "load",
    "load_metadata",
    "losses",
    "optim",
    "save",
    "tasks",
    "train_task",
]
