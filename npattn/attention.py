"""The attention classes of chapter 3, composed from the stage pairs in ``npattn.functional``.

Each class's forward runs the named stages and keeps their caches; its backward runs the same
stages' backward functions in reverse. No backward math lives here: only the order of the stages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn import functional as F
from npattn import kernels
from npattn._checks import as_input, check_grad_output, check_positive_int
from npattn.module import Module, Parameter
from npattn.random import RNGLike, resolve_rng, uniform_init

__all__ = ["SelfAttention_v1"]


class SelfAttention_v1(Module):
    """Self-attention with three trainable (d_in, d_out) matrices (the book's section 3.4.2).

    ``W_query``, ``W_key`` and ``W_value`` start uniform on [0, 1), drawn in that order like the
    book's ``torch.rand(d_in, d_out)``: ``rng=123`` (or ``TorchGenerator(123)``) gives the book's
    numbers. Values are drawn in float32 and then cast to ``dtype``.

    ``impl`` picks how stages 2-5 run ("auto", "reference", "fused", "tiled"; see
    ``npattn.kernels``); every choice gives the same numbers to rounding. While ``trace`` records,
    the reference path runs whatever ``impl`` says.

    forward: x (n, d_in) -> context_vec (n, d_out); a batch (b, n, d_in) -> (b, n, d_out).
    x is converted to the parameters' dtype.

    Raises:
        ConfigError: d_in or d_out not a positive integer; rng of an unknown kind; unknown impl.
        ShapeError, DTypeError: from forward, for an input of the wrong shape or kind.
        BackwardError: backward before any forward.
    """

    def __init__(
        self, d_in: int, d_out: int, *, rng: RNGLike = None, dtype: Any = np.float32, impl: str = "auto"
    ) -> None:
        super().__init__()
        self.impl = kernels.check_impl(impl)
        self.d_in = check_positive_int(d_in, "d_in")
        self.d_out = check_positive_int(d_out, "d_out")
        generator = resolve_rng(rng)
        shape = (self.d_in, self.d_out)
        self.W_query = Parameter(uniform_init(generator, shape, 0.0, 1.0, dtype))
        self.W_key = Parameter(uniform_init(generator, shape, 0.0, 1.0, dtype))
        self.W_value = Parameter(uniform_init(generator, shape, 0.0, 1.0, dtype))

    def extra_repr(self) -> str:
        impl = "" if self.impl == "auto" else f", impl={self.impl!r}"
        return f"d_in={self.d_in}, d_out={self.d_out}{impl}"

    def forward(self, x: Any) -> np.ndarray:
        """x (n, d_in) or (b, n, d_in) -> context_vec (n, d_out) or (b, n, d_out)."""
        x = as_input(x, self.d_in, self.W_query.dtype)
        record = self._record()
        if record:
            record("x", x)
        # Stage 1: project the same input three ways.
        queries, c_query = F.project_forward(x, self.W_query.data)
        keys, c_key = F.project_forward(x, self.W_key.data)
        values, c_value = F.project_forward(x, self.W_value.data)
        if record:
            record("queries", queries)
            record("keys", keys)
            record("values", values)
        # Stages 2-5: scores, scale + softmax, weights, context.
        context_vec, c_attention = kernels.attention(queries, keys, values, impl=self.impl, record=record)
        self._cache = (c_query, c_key, c_value, c_attention, context_vec.shape)
        return context_vec

    def backward(self, grad_output: Any) -> np.ndarray:
        """grad_output (like the output) -> dx (like x); accumulates into W_query/W_key/W_value.grad."""
        c_query, c_key, c_value, c_attention, out_shape = self._saved()
        d_context_vec = check_grad_output(grad_output, out_shape, self.W_query.dtype)
        d_queries, d_keys, d_values = kernels.attention_backward(d_context_vec, c_attention)
        dx_query, dW_query = F.project_backward(d_queries, c_query)
        dx_key, dW_key = F.project_backward(d_keys, c_key)
        dx_value, dW_value = F.project_backward(d_values, c_value)
        self.W_query.grad += dW_query
        self.W_key.grad += dW_key
        self.W_value.grad += dW_value
        # x feeds all three projections, so its gradient sums the three paths.
        return dx_query + dx_key + dx_value
