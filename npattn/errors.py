"""npattn's exceptions: one hierarchy, each class also a built-in error people already catch.

NpattnError
├── ShapeError        (ValueError)   an array has the wrong shape or rank
├── DTypeError        (TypeError)    an array has a dtype npattn cannot compute in
├── ConfigError       (ValueError)   a constructor or function argument is out of range
├── BackwardError     (RuntimeError) backward called before forward, or after the input changed
├── StateDictError    (ValueError, RuntimeError)  load_state_dict found missing/unexpected/bad keys
├── GradcheckError    (RuntimeError) analytical and numerical gradients disagree
├── CheckpointError   (ValueError)   a checkpoint file is missing, truncated or foreign
└── TrainingError     (RuntimeError) training stopped: the loss or a gradient is NaN or inf
"""

from __future__ import annotations

__all__ = [
    "BackwardError",
    "CheckpointError",
    "ConfigError",
    "DTypeError",
    "GradcheckError",
    "NpattnError",
    "ShapeError",
    "StateDictError",
    "TrainingError",
]


class NpattnError(Exception):
    """Base class of every error npattn raises on purpose."""


class ShapeError(NpattnError, ValueError):
    """An array has the wrong shape or rank; the message names the expected and the actual shape."""


class DTypeError(NpattnError, TypeError):
    """An array has a dtype npattn cannot compute in (complex, object, strings, ...)."""


class ConfigError(NpattnError, ValueError):
    """A constructor or function argument is out of its valid range."""


class BackwardError(NpattnError, RuntimeError):
    """``backward`` was called before ``forward`` or with a gradient that does not fit it."""


class StateDictError(NpattnError, ValueError, RuntimeError):
    """``load_state_dict`` found missing or unexpected keys, wrong shapes or non-finite values."""


class GradcheckError(NpattnError, RuntimeError):
    """Analytical and numerical gradients disagree (raised by ``npattn.gradcheck``)."""


class CheckpointError(NpattnError, ValueError):
    """A checkpoint file is missing, truncated, foreign, or holds something it must not."""


class TrainingError(NpattnError, RuntimeError):
    """Training stopped because the loss or a gradient became NaN or inf (weights left unchanged)."""
