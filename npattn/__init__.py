"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward):
    errors, _checks, random, functional   stage forward/backward pairs, validation, PyTorch's RNG
    module, layers, attention              Parameter/Module, Linear/Dropout, the chapter-3 classes
    gradcheck, cli                         tools on top of modules
"""

from npattn import functional
from npattn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
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
from npattn.layers import Dropout, Linear
from npattn.module import IncompatibleKeys, Module, ModuleList, Parameter
from npattn.random import TorchGenerator

__version__ = "0.1.0"

__all__ = [
    "BOOK_TOKENS",
    "BackwardError",
    "CausalAttention",
    "CheckpointError",
    "ConfigError",
    "DTypeError",
    "Dropout",
    "GradcheckError",
    "GradcheckReport",
    "IncompatibleKeys",
    "Linear",
    "Module",
    "ModuleList",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "NpattnError",
    "Parameter",
    "SelfAttention_v1",
    "SelfAttention_v2",
    "ShapeError",
    "StateDictError",
    "TensorCheck",
    "TorchGenerator",
    "__version__",
    "book_batch",
    "book_inputs",
    "functional",
    "gradcheck",
    "gradcheck_stage",
]
