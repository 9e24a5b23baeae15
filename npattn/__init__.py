"""npattn: self-attention with hand-derived backpropagation in pure NumPy.

Layers, bottom to top (no import runs upward):
    errors, _checks, random, functional   stage forward/backward pairs, validation, PyTorch's RNG
    module, layers, attention              Parameter/Module, Linear/Dropout, the chapter-3 classes
    gradcheck, cli                         tools on top of modules
    trace, diagnose, stagecheck, usercode  debugging tools: shapes, traces, row check, bug fingerprints
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
)
from npattn.gradcheck import GradcheckReport, TensorCheck, gradcheck, gradcheck_stage
from npattn.layers import Dropout, Linear
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
    check_shapes,
    compare,
    predict_shapes,
    trace,
    weights_of,
)
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
    "DTypeError",
    "Diagnosis",
    "Dropout",
    "GradcheckError",
    "GradcheckReport",
    "IncompatibleKeys",
    "Linear",
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
    "__version__",
    "book_batch",
    "book_inputs",
    "check_attention",
    "check_rows",
    "check_shapes",
    "compare",
    "diagnose",
    "functional",
    "gradcheck",
    "gradcheck_pipeline",
    "gradcheck_stage",
    "predict_shapes",
    "trace",
    "weights_of",
]
