"""The base of the chapter-3 classes built on ``Linear`` projections (SelfAttention_v2,
CausalAttention, MultiHeadAttention): stage 1 as three Linears, the causal ``mask`` buffer and
``Dropout``, and the stage-1 backward they share (the classes themselves: :mod:`npattn.nn.attention`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn import kernels
from npattn._checks import (
    as_batched_input,
    check_allocation,
    check_bool,
    check_grad_output,
    check_positive_int,
    check_probability,
)
from npattn.errors import ShapeError
from npattn.nn import functional as F
from npattn.nn.functional import Recorder
from npattn.nn.layers import Dropout, Linear
from npattn.nn.module import Module, Parameter


class _ProjectedAttention(Module):
    """What SelfAttention_v2, CausalAttention and MultiHeadAttention share: three ``Linear``
    projections (stage 1) and, for the causal classes, the ``mask`` buffer and a ``Dropout``."""

    _reads_children_parameters = True  # the fused projection reads W_query/W_key/W_value's weights itself

    W_query: Linear
    W_key: Linear
    W_value: Linear
    dropout: Dropout
    mask: np.ndarray
    _causal_buffers = frozenset({"mask"})  # load_state_dict refuses any other mask

    def _init_projections(self, d_in: Any, d_out: Any, qkv_bias: Any, generator: Any, dtype: Any, impl: Any) -> None:
        """W_query, W_key, W_value: Linear(d_in, d_out, bias=qkv_bias), drawn in that order; ``impl``
        picks how stages 2-5 run (``npattn.kernels``)."""
        self.impl = kernels.check_impl(impl)
        self.d_in = check_positive_int(d_in, "d_in")
        self.d_out = check_positive_int(d_out, "d_out")
        self.qkv_bias = check_bool(qkv_bias, "qkv_bias")
        self.W_query = Linear(self.d_in, self.d_out, bias=self.qkv_bias, rng=generator, dtype=dtype)
        self.W_key = Linear(self.d_in, self.d_out, bias=self.qkv_bias, rng=generator, dtype=dtype)
        self.W_value = Linear(self.d_in, self.d_out, bias=self.qkv_bias, rng=generator, dtype=dtype)

    def _init_causal(self, context_length: Any, dropout: Any, generator: Any) -> None:
        """self.dropout = Dropout(dropout) (drawing from the module's generator) and the ``mask``
        buffer: bool (context_length, context_length), True above the diagonal.

        The book registers ``torch.triu(torch.ones(...), diagonal=1)``, a float 0/1 tensor, and
        converts it with ``.bool()`` in every forward; npattn stores the bool mask itself. A book
        state dict's float mask loads into it (0/1 values only), and npattn's bool mask loads into
        the book's float buffer.
        """
        self.context_length = check_positive_int(context_length, "context_length")
        check_allocation((self.context_length,) * 2, bool, f"context_length={self.context_length}: the causal mask")
        self.dropout = Dropout(check_probability(dropout, "dropout"), rng=generator)
        self.register_buffer("mask", F.causal_mask(self.context_length))

    def _project(self, x: np.ndarray, record: Recorder | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
        """Stage 1: x (..., n, d_in) -> queries, keys, values (..., n, d_out), and the cache.

        The three Linear layers as one product (``F.project_qkv_forward``, weights side by side),
        then each layer's bias."""
        if record:
            record("x", x)
        layers = (self.W_query, self.W_key, self.W_value)
        qkv, c_project = F.project_qkv_forward(x, *(layer.weight.data.T for layer in layers))
        c_bias: list = [None, None, None]
        if self.qkv_bias:
            qkv, c_bias = zip(*(F.bias_forward(y, layer.bias.data) for y, layer in zip(qkv, layers)))  # type: ignore
        queries, keys, values = qkv
        if record:
            record("queries", queries)
            record("keys", keys)
            record("values", values)
        return queries, keys, values, (c_project, c_bias)

    def _project_backward(
        self, d_queries: np.ndarray, d_keys: np.ndarray, d_values: np.ndarray, c_qkv: tuple
    ) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """Stage 1 in reverse: dx (the sum of the three paths, ``F.project_qkv_backward``) and the
        three Linears' parameter gradients."""
        c_project, c_bias = c_qkv
        layers = (self.W_query, self.W_key, self.W_value)
        d_qkv = [d_queries, d_keys, d_values]
        grads: list[tuple[Parameter, np.ndarray]] = []
        for i, (layer, cache) in enumerate(zip(layers, c_bias)):
            if cache is not None:
                d_qkv[i], d_bias = F.bias_backward(d_qkv[i], cache)
                grads.append((layer.bias, d_bias))  # type: ignore[arg-type]
        dx, *dWs = F.project_qkv_backward(d_qkv[0], d_qkv[1], d_qkv[2], c_project)
        grads += [(layer.weight, dW.T) for layer, dW in zip(layers, dWs)]  # forward used W = weight^T
        return dx, grads

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (like the output) -> dx (like x) and every Linear's parameter gradients
        (``backward`` accumulates them). Stages 5 to 2 (``kernels.attention_backward``), then
        stage 1 (the three Linears).
        """
        c_qkv, c_attention, out_shape = self._saved()
        d_context_vec = check_grad_output(grad_output, out_shape, self.W_query.weight.dtype)
        d_queries, d_keys, d_values = kernels.attention_backward(d_context_vec, c_attention)
        return self._project_backward(d_queries, d_keys, d_values, c_qkv)

    def _causal_input(self, x: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Validate a batch (b, n, d_in) with n <= context_length; returns x and the mask argument
        of ``kernels.attention``: ``causal=True`` when mask[:n, :n] is the book's causal mask (any
        impl may run), else the explicit ``mask=`` (the reference path runs)."""
        x = as_batched_input(x, self.d_in, self.W_query.weight.dtype)
        n = x.shape[1]
        if n > self.context_length:
            raise ShapeError(
                f"x: sequence length n={n} exceeds context_length={self.context_length} (the causal mask is "
                f"{self.context_length} x {self.context_length}); build the module with context_length >= {n}"
            )
        mask = self.mask[:n, :n]
        if np.array_equal(mask, F.causal_mask(n)):
            return x, {"causal": True}
        return x, {"mask": mask.copy()}  # the forward's own: editing the buffer cannot change dx

    def _dropout_args(self, shape: tuple[int, ...]) -> dict[str, Any]:
        """Stage 4's arguments for kernels.attention: the keep mask and p (None and 0.0: identity)."""
        keep = self.dropout.keep_mask(shape)
        return {"dropout_keep": keep, "dropout_p": self.dropout.p if keep is not None else 0.0}
