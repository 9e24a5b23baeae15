"""Loss functions with PyTorch's names and reduction semantics, each a forward/backward pair.

    mse_loss(input, target, reduction="mean")        = mean((input - target)^2)
    cross_entropy(input, target, reduction="mean")   = mean(-log_softmax(input)[target])

Like the stage pairs of ``npattn.functional``, every loss comes as ``*_forward(input, target,
reduction) -> (loss, cache)`` and ``*_backward(d_loss, cache) -> (d_input,)``, side by side.
``MSELoss`` and ``CrossEntropyLoss`` wrap them as Modules: ``criterion(input, target)`` returns the
loss (a float, or an array for ``reduction="none"``) and ``criterion.backward()`` the gradient
with respect to ``input`` (the loss's own gradient, 1.0, unless another ``grad_output`` is given).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import as_array
from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.nn.functional.contract import wrap_stages
from npattn.nn.module import Module

__all__ = [
    "CrossEntropyLoss",
    "Loss",
    "MSELoss",
    "cross_entropy",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "mse_loss",
    "mse_loss_backward",
    "mse_loss_forward",
]

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ConfigError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return reduction


def _check_torch_keywords(owner: str, **given: Any) -> None:
    """PyTorch's loss keywords, accepted at the values npattn implements (their defaults; any
    negative ignore_index, which no class in [0, C) can equal) and refused otherwise.

    Raises:
        ConfigError: naming the keyword, the value and the value npattn takes.
    """
    for name, value in given.items():
        if name == "ignore_index":
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value < 0:
                continue  # no target is ignored: a negative class index is refused by the range check
            raise ConfigError(
                f"{owner}: ignore_index={value!r} is not supported (npattn ignores no targets); "
                "leave it at a negative integer such as -100 (PyTorch's default)"
            )
        default, why = _TORCH_KEYWORDS[name]
        if not (value is None if default is None else (isinstance(value, (int, float)) and value == default)):
            shown = f"an array of shape {value.shape}" if hasattr(value, "shape") else repr(value)
            raise ConfigError(f"{owner}: {name}={shown} is not supported ({why}); leave it at {default!r}")


_TORCH_KEYWORDS = {
    "weight": (None, "npattn weighs every class equally"),
    "size_average": (None, "PyTorch's deprecated form of reduction; use reduction='mean', 'sum' or 'none'"),
    "reduce": (None, "PyTorch's deprecated form of reduction; use reduction='mean', 'sum' or 'none'"),
    "label_smoothing": (0.0, "npattn's targets are not smoothed"),
}


def _check_real(stage: str, input: np.ndarray) -> None:
    """The stages' rule: real numbers (complex input came back as a complex loss)."""
    if input.dtype.kind not in "fiu":
        raise DTypeError(f"{stage}: input must hold real numbers (float or int), got dtype {input.dtype}")


def _reduce(per_element: np.ndarray, reduction: str, count: float) -> np.ndarray:
    """'none' -> the array itself; 'sum' -> its sum; 'mean' -> its sum / count (0-d arrays)."""
    if reduction == "none":
        return per_element
    total = np.sum(per_element)
    return total / count if reduction == "mean" else total


def _unreduce(d_loss: Any, shape: tuple[int, ...], reduction: str, count: float, dtype: np.dtype) -> np.ndarray:
    """The gradient of ``_reduce`` w.r.t. its per-element input: broadcast d_loss back to ``shape``."""
    d = as_array(d_loss, "d_loss", dtype)  # real numbers only: a complex d_loss is refused
    if reduction == "none":
        if d.shape != shape:
            raise ShapeError(f"d_loss: expected shape {shape} (the unreduced loss's), got {d.shape}")
        return d
    if d.shape != ():
        raise ShapeError(f"d_loss: expected a scalar for reduction={reduction!r}, got shape {d.shape}")
    return np.broadcast_to(d / count if reduction == "mean" else d, shape)


# ----------------------------------------------------------------------------------------------
# Mean squared error. input (...), target (same shape) -> loss () or (...) for "none".


def mse_loss_forward(input: np.ndarray, target: Any, reduction: str = "mean") -> tuple[np.ndarray, tuple]:
    """loss = reduce((input - target)^2); "mean" divides by the number of elements.

    Raises:
        ShapeError: target of another shape than input (PyTorch would broadcast and warn).
        ConfigError: an unknown reduction. DTypeError: input not real numbers.
    """
    _check_real("mse_loss_forward", input)
    reduction = _check_reduction(reduction)
    target = as_array(target, "target", input.dtype)
    if target.shape != input.shape:
        raise ShapeError(f"mse_loss: target shape {target.shape} differs from input shape {input.shape}")
    diff = input - target
    return _reduce(diff * diff, reduction, diff.size), (diff, reduction)


def mse_loss_backward(d_loss: Any, cache: tuple) -> tuple[np.ndarray]:
    """Returns (d_input,) = 2 * (input - target) * d_loss (/ count for "mean")."""
    # forward: loss = reduce((input - target)^2)
    diff, reduction = cache
    d_squares = _unreduce(d_loss, diff.shape, reduction, diff.size, diff.dtype)
    return (2 * diff * d_squares,)


# ----------------------------------------------------------------------------------------------
# Cross-entropy over logits. input (C,), (N, C) or (N, C, d1, ...) with the classes on axis 1
# (PyTorch's layout); target: class indices (the input's shape without the class axis), or class
# probabilities of the input's shape. loss () or, for "none", the input's shape without axis C.


def _log_softmax(z: np.ndarray, axis: int) -> np.ndarray:
    """log(softmax(z)), stable: z - max - log(sum(exp(z - max)))."""
    shifted = z - np.max(z, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def cross_entropy_forward(input: np.ndarray, target: Any, reduction: str = "mean") -> tuple[np.ndarray, tuple]:
    """loss = reduce(-sum_c p_c log softmax(input)_c), p = one_hot(target) for class indices.

    "mean" divides by the number of targets (N * d1 * ...) for indices, and by N (the input's
    size over the class axis) for probabilities, like PyTorch.

    Raises:
        ShapeError: a 0-d input, or a target that fits neither layout.
        ConfigError: class indices outside [0, C), or an unknown reduction. DTypeError: input not real numbers.
    """
    _check_real("cross_entropy_forward", input)
    reduction = _check_reduction(reduction)
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have a class axis, got a 0-d array")
    axis = 0 if input.ndim == 1 else 1
    n_classes = input.shape[axis]
    target_arr = np.asarray(target)
    log_probs = _log_softmax(input, axis)
    if target_arr.dtype == np.bool_:  # neither: it was read as probabilities of the wrong shape
        raise DTypeError(
            "cross_entropy: target of dtype bool: class indices are integers (target.astype(np.int64)), "
            "class probabilities floats"
        )
    if target_arr.dtype.kind in "iu":
        expected = input.shape[:axis] + input.shape[axis + 1 :]
        if target_arr.shape != expected:
            raise ShapeError(
                f"cross_entropy: class-index target must have shape {expected} (input {input.shape} "
                f"without its class axis {axis}), got {target_arr.shape}"
            )
        if target_arr.size and (target_arr.min() < 0 or target_arr.max() >= n_classes):
            ignored = (
                "; a negative target is what PyTorch's ignore_index marks (-100 by default, or the ignore_index "
                "given), but npattn's cross_entropy ignores no targets "
                "(npattn.nn.functional.token_cross_entropy_forward(logits, targets, ignore_index) does)"
                if (target_arr < 0).any()
                else ""
            )
            raise ConfigError(
                f"cross_entropy: target classes must lie in [0, {n_classes}), "
                f"got {target_arr.min()}..{target_arr.max()}{ignored}"
            )
        probs = np.moveaxis(np.eye(n_classes, dtype=input.dtype)[target_arr], -1, axis)
        count = target_arr.size
    else:
        probs = as_array(target_arr, "target", input.dtype)
        if probs.shape != input.shape:
            raise ShapeError(
                f"cross_entropy: target must be class indices (an integer array) or class probabilities "
                f"of the input's shape {input.shape}, got a {probs.dtype} array of shape {probs.shape}"
            )
        count = input.size // n_classes
    per_target = -np.sum(probs * log_probs, axis=axis)
    return _reduce(per_target, reduction, count), (log_probs, probs, axis, reduction, count)


def cross_entropy_backward(d_loss: Any, cache: tuple) -> tuple[np.ndarray]:
    """Returns (d_input,) = (softmax(input) * sum_c p_c - p) * d_loss (/ count for "mean")."""
    # forward: loss = reduce(-sum(p * log_softmax(input), axis))
    log_probs, probs, axis, reduction, count = cache
    shape = log_probs.shape[:axis] + log_probs.shape[axis + 1 :]
    d_per_target = np.expand_dims(_unreduce(d_loss, shape, reduction, count, log_probs.dtype), axis)
    p_total = np.sum(probs, axis=axis, keepdims=True)  # 1 for one-hot or normalised targets
    return ((np.exp(log_probs) * p_total - probs) * d_per_target,)


# The stage pairs' checks (npattn.nn.functional.contract): arrays, caches tagged by their forward,
# every backward refusing a cache its forward did not return.
wrap_stages(globals(), ["mse_loss_forward", "mse_loss_backward", "cross_entropy_forward", "cross_entropy_backward"])


# ----------------------------------------------------------------------------------------------
# Functional forms and Modules.


def mse_loss(
    input: Any,
    target: Any,
    reduction: str = "mean",
    *,
    size_average: Any = None,
    reduce: Any = None,
    weight: Any = None,
) -> Any:
    """``torch.nn.functional.mse_loss``: a float (or an array for "none").

    Raises:
        ConfigError: PyTorch's size_average, reduce or weight at a value other than None.
    """
    _check_torch_keywords("mse_loss", size_average=size_average, reduce=reduce, weight=weight)
    loss, _ = mse_loss_forward(as_array(input, "input"), target, reduction)
    return loss if reduction == "none" else float(loss)


def cross_entropy(
    input: Any,
    target: Any,
    reduction: str = "mean",
    *,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    label_smoothing: float = 0.0,
) -> Any:
    """``torch.nn.functional.cross_entropy`` over logits: a float (or an array for "none").
    PyTorch's other keywords are keyword-only here (reduction stays the third argument).

    Raises:
        ConfigError: PyTorch's weight, size_average, reduce other than None, label_smoothing other
            than 0, ignore_index >= 0 (npattn ignores no targets).
    """
    _check_torch_keywords(
        "cross_entropy", weight=weight, size_average=size_average, ignore_index=ignore_index, reduce=reduce,
        label_smoothing=label_smoothing,
    )  # fmt: skip
    loss, _ = cross_entropy_forward(as_array(input, "input"), target, reduction)
    return loss if reduction == "none" else float(loss)


class Loss(Module):
    """A loss as a Module: forward(input, target) -> loss; backward(grad_output=1.0) -> d_input."""

    _forward = staticmethod(mse_loss_forward)
    _backward = staticmethod(mse_loss_backward)

    def __init__(self, reduction: str = "mean", *, size_average: Any = None, reduce: Any = None) -> None:
        """Raises ConfigError: an unknown reduction; PyTorch's size_average or reduce other than None."""
        super().__init__()
        _check_torch_keywords(type(self).__name__, size_average=size_average, reduce=reduce)
        self.reduction = _check_reduction(reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"

    def forward(self, input: Any, target: Any) -> Any:
        """input, target -> the loss (float; an array for reduction="none")."""
        loss, self._cache = type(self)._forward(as_array(input, "input"), target, self.reduction)
        return loss if self.reduction == "none" else float(loss)

    def backward(self, grad_output: Any = 1.0) -> np.ndarray:
        """d(loss)/d(input) times ``grad_output`` (1.0 for a scalar loss)."""
        (d_input,) = type(self)._backward(grad_output, self._saved())
        return d_input


class MSELoss(Loss):
    """``torch.nn.MSELoss(reduction="mean")``: input and target of the same shape."""


class CrossEntropyLoss(Loss):
    """``torch.nn.CrossEntropyLoss(reduction="mean")`` over logits, classes on axis 1 (axis 0 for 1-D).

    PyTorch's other keywords are taken at the values npattn implements: weight, size_average and
    reduce None, label_smoothing 0, a negative ignore_index (-100, the default: no target is
    ignored); other values raise ConfigError.
    """

    _forward = staticmethod(cross_entropy_forward)
    _backward = staticmethod(cross_entropy_backward)

    def __init__(
        self,
        reduction: str = "mean",
        *,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        label_smoothing: float = 0.0,
    ) -> None:
        _check_torch_keywords(
            type(self).__name__, weight=weight, ignore_index=ignore_index, label_smoothing=label_smoothing
        )
        super().__init__(reduction, size_average=size_average, reduce=reduce)
