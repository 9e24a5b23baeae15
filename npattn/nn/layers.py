"""Linear and Dropout: PyTorch's ``nn.Linear`` and ``nn.Dropout``, built from the stage pairs.

``Linear`` is stage 1 (project) with PyTorch's layout, weight (out_features, in_features) and
``y = x @ weight^T + bias``, plus the bias stage. ``Dropout`` is stage 4 (weights) as a layer: it
owns the random keep mask; the attention classes ask it for the mask (``keep_mask``) and hand it
to ``F.attention_forward``, so the dropout math lives only in ``F.dropout_forward/backward``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import as_array, as_features, check_bool, check_grad_output, check_positive_int, check_probability
from npattn.errors import ConfigError, ShapeError
from npattn.nn import functional as F
from npattn.nn.functional.contract import check_bool_mask, check_keep_needs_p
from npattn.nn.module import Module, Parameter
from npattn.random import RNGLike, TorchGenerator, linear_init_bounds, resolve_rng, uniform_init

__all__ = ["Dropout", "Linear"]


class Linear(Module):
    """``nn.Linear``: y = x @ weight^T + bias, weight (out_features, in_features), bias (out_features,).

    Initialised like PyTorch: weight then bias, each uniform on about [-1/sqrt(in), 1/sqrt(in)],
    drawn in float32 from ``rng`` and cast to ``dtype``: None (the default) continues
    ``npattn.default_generator`` (``npattn.manual_seed(s); Linear(...)`` is bit-identical to
    ``torch.manual_seed(s); nn.Linear(...)``), an int seed means a fresh ``TorchGenerator(seed)``. ``bias=False`` leaves
    ``self.bias = None`` (absent from ``state_dict``, like PyTorch).

    forward: x (..., in_features) -> (..., out_features).

    Raises:
        ConfigError: in_features/out_features not positive integers, bias not a bool, a bad rng.
        ShapeError, DTypeError: from forward/backward, for an input or gradient of the wrong shape or kind.
        BackwardError: backward before any forward.
    """

    bias: Parameter | None

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, rng: RNGLike = None, dtype: Any = np.float32
    ) -> None:
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features")
        self.out_features = check_positive_int(out_features, "out_features")
        has_bias = check_bool(bias, "bias")
        generator = resolve_rng(rng)
        w_bound, b_bound = linear_init_bounds(self.in_features)
        shape = (self.out_features, self.in_features)
        self.weight = Parameter(uniform_init(generator, shape, -w_bound, w_bound, dtype))
        self.bias = (
            Parameter(uniform_init(generator, (self.out_features,), -b_bound, b_bound, dtype)) if has_bias else None
        )

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"

    def forward(self, x: Any) -> np.ndarray:
        """x (..., in_features) -> (..., out_features); x is converted to the weight's dtype."""
        x = as_features(x, self.in_features, self.weight.dtype)
        # The stage keeps its own copy of the weight: editing it before backward cannot change dx.
        y, c_project = F.project_forward(x, self.weight.data.T)
        c_bias = None
        if self.bias is not None:
            y, c_bias = F.bias_forward(y, self.bias.data)
        self._cache = (c_project, c_bias, y.shape)
        return y

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (..., out_features) -> dx (..., in_features), [(weight, dW), (bias, d_bias)]."""
        c_project, c_bias, out_shape = self._saved()
        d_y = check_grad_output(grad_output, out_shape, self.weight.dtype)
        grads = []
        if self.bias is not None:
            d_y, d_bias = F.bias_backward(d_y, c_bias)
            grads.append((self.bias, d_bias))
        dx, dW = F.project_backward(d_y, c_project)
        grads.append((self.weight, dW.T))  # forward projected with W = weight^T
        return dx, grads


class Dropout(Module):
    """``nn.Dropout(p, *, inplace=False)``: inverted dropout, ``x * keep / (1 - p)`` in training mode, identity in eval
    mode (and for p = 0). backward multiplies by the same mask.

    The keep mask (bool, True = kept, each element kept with probability 1 - p) is drawn from
    ``rng``: None (the default) means ``npattn.default_generator``, an int a fresh
    ``TorchGenerator(int)``; the attention classes pass their own generator. From a TorchGenerator
    the mask is PyTorch's CPU mask bit for bit (``bernoulli_(1 - p)``: one float64 uniform per
    element), so ``npattn.manual_seed(123); npattn.Dropout(0.5)(np.ones((6, 6)))`` prints the
    book's matrix. A NumPy Generator keeps elements whose uniform is >= p.

    Fixing the mask (for gradient checks in training mode, or to replay a mask from elsewhere):
    assign a bool array to ``fixed_keep``; every training-mode forward then uses it instead of
    drawing (it must have the input's shape or broadcast to it). ``fixed_keep = None`` (the
    default) draws a fresh mask per forward. ``keep_mask(shape)`` returns the mask a forward
    would use, so ``d.fixed_keep = d.keep_mask(shape)`` fixes a freshly drawn one.

    Raises:
        ConfigError: p outside [0, 1) (also when assigned later: ``d.p = 'abc'``), a bad rng,
            ``inplace=True``.
        DTypeError: ``fixed_keep`` that is not a bool array.
        ShapeError: ``fixed_keep`` that does not broadcast to the input's shape.
        ConfigError: in training mode, a ``fixed_keep`` that drops anything while p = 0 (the kept
            elements would not be rescaled; an all-True mask is the identity and is accepted).
    """

    _fixed_keep: np.ndarray | None
    _p: float

    def __init__(self, p: float = 0.5, *, inplace: bool = False, rng: RNGLike = None) -> None:
        super().__init__()
        if not (isinstance(inplace, (bool, np.bool_)) and not inplace):
            raise ConfigError(
                f"Dropout: inplace={inplace!r:.40} is not supported: npattn's forward returns a new array and "
                "leaves its input as it is (backward needs nothing of it); leave inplace at False"
            )
        self.p = p
        self.rng = resolve_rng(rng)
        self.fixed_keep = None

    @property
    def p(self) -> float:
        """The probability of dropping an element, in [0, 1); assigning checks it like the constructor."""
        return self._p

    @p.setter
    def p(self, value: Any) -> None:
        object.__setattr__(self, "_p", check_probability(value, "dropout p"))

    @property
    def fixed_keep(self) -> np.ndarray | None:
        """The fixed keep mask (bool, True = kept) or None (a fresh mask each training forward)."""
        return self._fixed_keep

    @fixed_keep.setter
    def fixed_keep(self, keep: Any) -> None:
        if keep is not None:
            keep = check_bool_mask(np.asarray(keep), "fixed_keep", "True = kept")
        object.__setattr__(self, "_fixed_keep", keep)

    def extra_repr(self) -> str:
        return f"p={self.p}"

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """The keep mask for an input of ``shape`` in the current mode: None when dropout is the
        identity (eval mode or p = 0), ``fixed_keep`` when set, else a fresh draw from ``rng``.

        Raises:
            ShapeError: ``fixed_keep`` does not broadcast to ``shape``.
        """
        if not self.training:
            return None
        keep = self.fixed_keep
        check_keep_needs_p(keep, self.p, "Dropout.fixed_keep", "p")
        if self.p == 0.0:
            return None
        if keep is None:
            if isinstance(self.rng, TorchGenerator):
                return self.rng.bernoulli(tuple(shape), 1.0 - self.p, dtype=bool)
            return uniform_init(self.rng, tuple(shape), 0.0, 1.0, np.float32) >= self.p
        keep = keep.copy()  # the forward's own: editing fixed_keep before backward cannot change dx
        try:
            broadcast = np.broadcast_shapes(keep.shape, tuple(shape))
        except ValueError:
            broadcast = None
        if broadcast != tuple(shape):
            raise ShapeError(
                f"fixed_keep has shape {keep.shape}, which does not broadcast to the input's {tuple(shape)}"
            )
        return keep

    def forward(self, x: Any) -> np.ndarray:
        """x (any shape, floating) -> same shape."""
        x = as_array(x, "x")
        keep = self.keep_mask(x.shape)
        cache = None
        if keep is not None:
            x, cache = F.dropout_forward(x, keep, self.p)
        self._cache = (cache, x.shape, x.dtype)
        return x

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (like the output) -> dx, through the same keep mask; no parameters."""
        cache, out_shape, dtype = self._saved()
        d_out = check_grad_output(grad_output, out_shape, dtype)
        if cache is None:
            return d_out, []
        (dx,) = F.dropout_backward(d_out, cache)
        return dx, []


def check_deterministic(module: Module, who: str) -> None:
    """Refuse a module whose forward is random: a ``Dropout`` with p > 0 in training mode and no
    ``fixed_keep`` draws a new keep mask on every call (gradcheck's differences would compare
    different functions).

    Raises:
        ConfigError: names every such Dropout and its p.
    """
    random = [
        f"{name or type(sub).__name__} (p={sub.p})"
        for name, sub in module.named_modules()
        if isinstance(sub, Dropout) and sub.training and sub.p > 0.0 and sub.fixed_keep is None
    ]
    if random:
        raise ConfigError(
            f"{who}: the forward of {type(module).__name__} is random (dropout in training mode draws a new keep "
            f"mask each call: {', '.join(random)}), so no gradient can be compared: call .eval() first, or fix "
            "each mask with dropout.fixed_keep = dropout.keep_mask(shape)"
        )
