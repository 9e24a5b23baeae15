"""The attention classes of chapter 3, composed from the stage pairs in ``npattn.functional``.

Each class's forward runs the named stages and keeps their caches; its backward runs the same
stages' backward functions in reverse. No backward math lives here: only the order of the stages.
The Linear-projection classes' shared base (stage 1, the causal mask, dropout) is in
:mod:`npattn.nn.projection`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn import kernels
from npattn._checks import as_input, check_bytes, check_float_dtype, check_grad_output, check_positive_int
from npattn.errors import ConfigError
from npattn.nn import functional as F
from npattn.nn.layers import Linear
from npattn.nn.module import Module, Parameter
from npattn.nn.projection import _ProjectedAttention
from npattn.nn.sequential import ModuleList
from npattn.random import RNGLike, resolve_rng, uniform_init

__all__ = [
    "CausalAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "SelfAttention_v1",
    "SelfAttention_v2",
]


class SelfAttention_v1(Module):
    """Self-attention with three trainable (d_in, d_out) matrices (the book's section 3.4.2).

    ``W_query``, ``W_key`` and ``W_value`` start uniform on [0, 1), drawn in that order like the
    book's ``torch.rand(d_in, d_out)``, in float32 and then cast to ``dtype``. ``rng`` (every class
    here takes it): None, the default, continues ``npattn.default_generator`` like a torch module
    does, so ``npattn.manual_seed(123); SelfAttention_v1(3, 2)`` gives the book's numbers and a
    module built next continues the same stream; an int is a fresh ``TorchGenerator(int)``
    (``rng=123``: the seed, then this one module); a TorchGenerator or a NumPy Generator is used
    as it is.

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
        # Stage 1: project the same input three ways, as one product. The cache keeps its own copy
        # of the weights (side by side): editing W_query.data before backward cannot change dx.
        (queries, keys, values), c_project = F.project_qkv_forward(
            x, self.W_query.data, self.W_key.data, self.W_value.data
        )
        if record:
            record("queries", queries)
            record("keys", keys)
            record("values", values)
        # Stages 2-5: scores, scale + softmax, weights, context.
        # copy=False: queries, keys, values are this forward's own arrays, never handed out.
        context_vec, c_attention = kernels.attention(
            queries, keys, values, impl=self.impl, record=record, copy=False
        )
        self._cache = (c_project, c_attention, context_vec.shape)
        return context_vec

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (like the output) -> dx (like x) and the gradients of W_query, W_key, W_value
        (``backward`` accumulates them into the ``.grad``s)."""
        c_project, c_attention, out_shape = self._saved()
        d_context_vec = check_grad_output(grad_output, out_shape, self.W_query.dtype)
        d_queries, d_keys, d_values = kernels.attention_backward(d_context_vec, c_attention)
        # x feeds all three projections, so dx sums the three paths (one product).
        dx, dW_query, dW_key, dW_value = F.project_qkv_backward(d_queries, d_keys, d_values, c_project)
        return dx, [(self.W_query, dW_query), (self.W_key, dW_key), (self.W_value, dW_value)]


class SelfAttention_v2(_ProjectedAttention):
    """Self-attention with ``nn.Linear`` projections (the book's section 3.4.2, listing 3.2).

    ``W_query``, ``W_key``, ``W_value`` are ``Linear(d_in, d_out, bias=qkv_bias)`` with PyTorch's
    default init, drawn in that order: ``rng=789`` gives the book's numbers.

    ``impl`` ("auto", "reference", "fused", "tiled") picks how stages 2-5 run, as for
    ``SelfAttention_v1``; the reference path runs while tracing, with dropout in training mode,
    and when the ``mask`` buffer is not the book's causal mask.

    forward: x (n, d_in) -> context_vec (n, d_out); a batch (b, n, d_in) -> (b, n, d_out).

    Raises:
        ConfigError: d_in or d_out not a positive integer; qkv_bias not a bool; a bad rng.
        ShapeError, DTypeError: from forward, for an input of the wrong shape or kind.
        BackwardError: backward before any forward.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        qkv_bias: bool = False,
        *,
        rng: RNGLike = None,
        dtype: Any = np.float32,
        impl: str = "auto",
    ) -> None:
        super().__init__()
        self._init_projections(d_in, d_out, qkv_bias, resolve_rng(rng), dtype, impl)

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}, qkv_bias={self.qkv_bias}"

    def forward(self, x: Any) -> np.ndarray:
        """x (n, d_in) or (b, n, d_in) -> context_vec (n, d_out) or (b, n, d_out)."""
        x = as_input(x, self.d_in, self.W_query.weight.dtype)
        record = self._record()
        queries, keys, values, c_qkv = self._project(x, record)
        # Stages 2-5: scores, scale + softmax, weights, context.
        # copy=False: queries, keys, values are this forward's own arrays, never handed out.
        context_vec, c_attention = kernels.attention(
            queries, keys, values, impl=self.impl, record=record, copy=False
        )
        self._cache = (c_qkv, c_attention, context_vec.shape)
        return context_vec


class CausalAttention(_ProjectedAttention):
    """Causal self-attention with dropout on the attention weights (the book's listing 3.3).

    Token i attends to tokens 0..i only: the ``mask`` buffer (bool, True above the diagonal) sets
    later tokens' scores to -inf before the softmax. ``dropout`` is the probability of dropping an
    attention weight in training mode (``self.dropout``, a ``Dropout``; call ``eval()`` to turn it
    off). Construction draws W_query, W_key, W_value like the book: ``rng=123`` gives its numbers.

    ``impl`` ("auto", "reference", "fused", "tiled") picks how stages 2-5 run, as for
    ``SelfAttention_v1``; the reference path runs while tracing, with dropout in training mode,
    and when the ``mask`` buffer is not the book's causal mask.

    forward: x (b, n, d_in) with n <= context_length -> context_vec (b, n, d_out).

    Raises:
        ConfigError: d_in, d_out, context_length not positive integers; dropout outside [0, 1);
            qkv_bias not a bool; a bad rng.
        ShapeError: x not (b, n, d_in), or n > context_length. DTypeError: non-numeric x.
        BackwardError: backward before any forward.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        qkv_bias: bool = False,
        *,
        rng: RNGLike = None,
        dtype: Any = np.float32,
        impl: str = "auto",
    ) -> None:
        super().__init__()
        generator = resolve_rng(rng)
        self._init_projections(d_in, d_out, qkv_bias, generator, dtype, impl)
        self._init_causal(context_length, dropout, generator)

    def extra_repr(self) -> str:
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, context_length={self.context_length}, "
            f"dropout={self.dropout.p}, qkv_bias={self.qkv_bias}"
        )

    def forward(self, x: Any) -> np.ndarray:
        """x (b, n, d_in) -> context_vec (b, n, d_out)."""
        x, mask_arg = self._causal_input(x)
        record = self._record()
        queries, keys, values, c_qkv = self._project(x, record)
        b, n = x.shape[:2]
        # Stages 2-5: scores, causal mask + scale + softmax, dropout, context.
        context_vec, c_attention = kernels.attention(
            queries, keys, values, **mask_arg, impl=self.impl, **self._dropout_args((b, n, n)), record=record,
            copy=False,  # this forward's own projections, never handed out
        )
        self._cache = (c_qkv, c_attention, context_vec.shape)
        return context_vec


class MultiHeadAttentionWrapper(Module):
    """``num_heads`` independent ``CausalAttention`` heads side by side (the book's listing 3.4).

    ``heads`` is a ``ModuleList``; head i's parameters are ``heads.i.W_query.weight``, ... Heads are
    built in order from one generator, like the book's list comprehension after one seed.

    ``impl`` ("auto", "reference", "fused", "tiled") picks how stages 2-5 run, as for
    ``SelfAttention_v1``; the reference path runs while tracing, with dropout in training mode,
    and when the ``mask`` buffer is not the book's causal mask.

    forward: x (b, n, d_in) -> (b, n, d_out * num_heads), the heads' outputs concatenated.

    Raises:
        ConfigError: any argument out of range (see CausalAttention; num_heads a positive integer).
        ShapeError, DTypeError, BackwardError: as CausalAttention.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        rng: RNGLike = None,
        dtype: Any = np.float32,
        impl: str = "auto",
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int(num_heads, "num_heads")
        n = check_positive_int(context_length, "context_length")
        d_in, d_out = check_positive_int(d_in, "d_in"), check_positive_int(d_out, "d_out")
        per_head = 3 * (d_in + 1) * d_out * check_float_dtype(dtype).itemsize + n * n + 4096  # weights, mask, objects
        what = f"num_heads={self.num_heads} heads of d_in={d_in}, d_out={d_out}, context_length={n}"
        check_bytes(self.num_heads * per_head, f"MultiHeadAttentionWrapper with {what}")
        generator = resolve_rng(rng)
        self.heads = ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias, rng=generator, dtype=dtype, impl=impl)
                for _ in range(self.num_heads)
            ]
        )

    def extra_repr(self) -> str:
        head: Any = self.heads[0]
        return f"{head.extra_repr()}, num_heads={self.num_heads}"

    def forward(self, x: Any) -> np.ndarray:
        """x (b, n, d_in) -> (b, n, d_out * num_heads)."""
        record = self._record()
        outputs = []
        for i, head in enumerate(self.heads):
            # While tracing, each head records its stages as "heads.i.<stage>".
            own = head._recorder
            if record:
                head._recorder = lambda name, arr, i=i: record(f"heads.{i}.{name}", arr)
            try:
                outputs.append(head(x))
            finally:
                head._recorder = own
        context_vec, c_concat = F.concat_forward(outputs)
        if record:
            record("context_vec", context_vec)
        self._cache = (c_concat, context_vec.shape, outputs[0].dtype)
        return context_vec

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (b, n, d_out * num_heads) -> dx (b, n, d_in) and every head's parameter gradients."""
        c_concat, out_shape, dtype = self._saved()
        d_context_vec = check_grad_output(grad_output, out_shape, dtype)
        d_heads = F.concat_backward(d_context_vec, c_concat)
        dx: np.ndarray | None = None
        grads: list[tuple[Parameter, np.ndarray]] = []
        for head, d_head in zip(self.heads, d_heads):
            dx_head, grads_head = head._gradients(d_head)
            dx = dx_head if dx is None else dx + dx_head
            grads += grads_head
        assert dx is not None  # num_heads >= 1
        return dx, grads


class MultiHeadAttention(_ProjectedAttention):
    """Multi-head causal attention with split weights and an output projection (listing 3.5).

    One ``Linear(d_in, d_out)`` each for W_query, W_key, W_value; their outputs are split into
    ``num_heads`` heads of ``head_dim = d_out // num_heads`` columns, each head runs causal attention
    with scale 1/sqrt(head_dim), the heads are merged back to d_out columns, and ``out_proj``
    (``Linear(d_out, d_out)``, with bias) mixes them. Drawn in the book's order (W_query, W_key,
    W_value, out_proj): ``rng=123`` gives its numbers.

    ``impl`` ("auto", "reference", "fused", "tiled") picks how stages 2-5 run, as for
    ``SelfAttention_v1``; the reference path runs while tracing, with dropout in training mode,
    and when the ``mask`` buffer is not the book's causal mask.

    forward: x (b, n, d_in) with n <= context_length -> context_vec (b, n, d_out).

    Raises:
        ConfigError: as CausalAttention; num_heads not a positive integer or not dividing d_out.
        ShapeError, DTypeError, BackwardError: as CausalAttention.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        rng: RNGLike = None,
        dtype: Any = np.float32,
        impl: str = "auto",
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int(num_heads, "num_heads")
        d_out = check_positive_int(d_out, "d_out")
        if d_out % self.num_heads:
            raise ConfigError(
                f"d_out must be divisible by num_heads, got d_out={d_out} and num_heads={self.num_heads} "
                f"(remainder {d_out % self.num_heads})"
            )
        self.head_dim = d_out // self.num_heads
        generator = resolve_rng(rng)
        self._init_projections(d_in, d_out, qkv_bias, generator, dtype, impl)
        self.out_proj = Linear(d_out, d_out, rng=generator, dtype=dtype)
        self._init_causal(context_length, dropout, generator)

    def extra_repr(self) -> str:
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, context_length={self.context_length}, "
            f"dropout={self.dropout.p}, num_heads={self.num_heads}, qkv_bias={self.qkv_bias}"
        )

    def forward(self, x: Any) -> np.ndarray:
        """x (b, n, d_in) -> context_vec (b, n, d_out)."""
        x, mask_arg = self._causal_input(x)
        record = self._record()
        queries, keys, values, c_qkv = self._project(x, record)
        b, n = x.shape[:2]
        h = self.num_heads
        # (b, n, d_out) -> (b, num_heads, n, head_dim): the heads become a batch axis.
        queries, c_split_q = F.split_heads_forward(queries, h)
        keys, c_split_k = F.split_heads_forward(keys, h)
        values, c_split_v = F.split_heads_forward(values, h)
        # Stages 2-5 in every head at once, scale 1/sqrt(head_dim).
        context_vec, c_attention = kernels.attention(
            queries, keys, values, **mask_arg, impl=self.impl, **self._dropout_args((b, h, n, n)), record=record,
            copy=False,  # this forward's own projections, never handed out
        )
        # (b, num_heads, n, head_dim) -> (b, n, d_out), then the output projection.
        merged, c_merge = F.merge_heads_forward(context_vec)
        if record:
            record("merged_heads", merged)
        context_vec = self.out_proj(merged)
        if record:
            record("out_proj", context_vec)
        self._cache = (c_qkv, c_split_q, c_split_k, c_split_v, c_attention, c_merge)
        return context_vec

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (b, n, d_out) -> dx (b, n, d_in) and every Linear's parameter gradients."""
        c_qkv, c_split_q, c_split_k, c_split_v, c_attention, c_merge = self._saved()
        d_merged, grads_out = self.out_proj._gradients(grad_output)
        (d_context_vec,) = F.merge_heads_backward(d_merged, c_merge)
        d_queries, d_keys, d_values = kernels.attention_backward(d_context_vec, c_attention)
        (d_queries,) = F.split_heads_backward(d_queries, c_split_q)
        (d_keys,) = F.split_heads_backward(d_keys, c_split_k)
        (d_values,) = F.split_heads_backward(d_values, c_split_v)
        dx, grads = self._project_backward(d_queries, d_keys, d_values, c_qkv)
        return dx, grads_out + grads
