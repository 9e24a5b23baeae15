"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward):
    errors, _checks, random, functional   stage forward/backward pairs, validation, PyTorch's RNG
    fused, tiled, kernels                  fast paths of stages 2-5 and the dispatcher between them
    module, attention                      Parameter/Module and the chapter-3 classes
    gradcheck, cli                         tools on top of modules
"""

from npattn import functional, fused, kernels, tiled  # fast paths of stages 2-5 (issue 6)
from npattn.attention import SelfAttention_v1
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.errors import (
    BackwardError,
    CheckpointError,
    ConfigError,
    DTypeError,
    GradcheckError,
    NpattnError,
    ShapeError,
    StateDictError,
)
from npattn.gradcheck import GradcheckReport, TensorCheck, gradcheck, gradcheck_stage
from npattn.module import IncompatibleKeys, Module, ModuleList, Parameter
from npattn.random import TorchGenerator

__version__ = "0.1.0"

__all__ = [
    "BOOK_TOKENS",
    "BackwardError",
    "CheckpointError",
    "ConfigError",
    "DTypeError",
    "GradcheckError",
    "GradcheckReport",
    "IncompatibleKeys",
    "Module",
    "ModuleList",
    "NpattnError",
    "Parameter",
    "SelfAttention_v1",
    "ShapeError",
    "StateDictError",
    "TensorCheck",
    "TorchGenerator",
    "__version__",
    "book_batch",
    "book_inputs",
    "functional",
    "fused",
    "gradcheck",
    "gradcheck_stage",
    "kernels",
    "tiled",
]
