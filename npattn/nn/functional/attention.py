"""Stateless forward/backward pairs, one pair per stage of attention, side by side.

Every ``*_forward`` returns ``(output, cache)``; the matching ``*_backward(d_output, cache)``
returns the gradients with respect to the forward's array inputs, in the same order.
Shapes act on the last two axes; leading axes (batch, heads) broadcast through.
Notation: n queries, m keys (m = n in self-attention), d = d_in, k = d_out (or head_dim).

The five stages of the seed article, as in SelfAttention_v1.forward:

    1 project   queries = x @ W_query, keys = x @ W_key, values = x @ W_value
    2 scores    attn_scores = queries @ keys^T
    3 softmax   attn_weights = softmax(attn_scores * scale) over keys (scale = 1/sqrt(k);
                a causal mask sets masked scores to -inf first)
    4 weights   attn_weights = dropout(attn_weights) (identity without dropout)
    5 context   context_vec = attn_weights @ values

Nothing here knows about modules or parameters: every attention class composes these pairs
(with the multi-head reshapes and concat of heads.py).

Inputs are ndarrays and are not converted (a PyTorch tensor is taken as its ndarray, as the
modules take it; a list, a number or None is refused with a DTypeError naming the stage and the
argument: ``npattn._checks.stage_arrays``, applied to every stage at the end, with the checks of
``contract``: scalar arguments, bool masks, each backward's cache and upstream gradients). Shapes are
checked, because a mismatch would otherwise surface as a raw matmul or broadcasting traceback,
or worse as a silently broadcast gradient: each forward checks that its operands fit together
and each backward that the upstream gradient has the forward output's shape, raising
``ShapeError`` with both shapes (a few tuple comparisons per call, nothing proportional to the
data). Operands that are not real numbers (bool, complex, object) are refused with a
``DTypeError``; other dtype conversions are the modules', once at their entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from npattn._checks import cast, check_allocation, check_nonnegative_int
from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.nn.functional.contract import check_dropout, check_keep_needs_p

__all__ = [
    "Recorder",
    "attention_backward",
    "attention_forward",
    "bias_backward",
    "bias_forward",
    "causal_mask",
    "context_backward",
    "context_forward",
    "dropout_backward",
    "dropout_forward",
    "mask_backward",
    "mask_forward",
    "project_backward",
    "project_forward",
    "project_qkv_backward",
    "project_qkv_forward",
    "scores_backward",
    "scores_forward",
    "softmax",
    "softmax_backward",
    "softmax_forward",
]

Recorder = Callable[[str, np.ndarray], None]
"""A callback ``record(stage_name, array)`` that forward passes call for every named stage."""


def _T(a: np.ndarray) -> np.ndarray:
    """Transpose the last two axes (``a.mT`` in PyTorch)."""
    return a.swapaxes(-1, -2)


def _shape_error(stage: str, rule: str, **arrays: np.ndarray) -> ShapeError:
    """ShapeError naming the stage, the rule its operands break and every operand's shape."""
    got = ", ".join(f"{name} {np.shape(a)}" for name, a in arrays.items())
    return ShapeError(f"{stage}: {rule}; got {got}")


def _check_grad(stage: str, d_out: np.ndarray, shape: tuple[int, ...]) -> None:
    """The upstream gradient must have exactly the forward output's shape (no silent broadcasting)."""
    if (d_out.shape if type(d_out) is np.ndarray else np.shape(d_out)) != shape:
        raise ShapeError(f"{stage}: expected a gradient of shape {shape} (the forward output's), got {np.shape(d_out)}")


def _not_numbers(stage: str, **arrays: np.ndarray) -> DTypeError:
    """DTypeError for the first operand that does not hold real numbers (float or int). Callers
    test ``a.dtype.kind not in "fiu"`` inline: NumPy's matmul of bools is a logical and/or, and
    its softmax of bools fails, so bool (and complex, object, ...) arrays are refused."""
    name, a = next((name, a) for name, a in arrays.items() if a.dtype.kind not in "fiu")
    return DTypeError(f"{stage}: {name} must hold real numbers (float or int), got dtype {a.dtype}")


def _broadcasts_to(small: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """True if an array of shape ``small`` broadcasts to ``shape`` without changing it."""
    try:
        return np.broadcast_shapes(small, shape) == shape
    except ValueError:
        return False


def _check_matmul(stage: str, rule: str, a_axis: int, b_axis: int, **operands: np.ndarray) -> None:
    """Both operands at least 2-D, with equal leading (batch, head) axes and a.shape[a_axis] == b.shape[b_axis].

    Equal leading axes, not merely broadcastable ones: the backward does not sum over broadcast axes.
    """
    a, b = operands.values()
    if a.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
        raise _not_numbers(stage, **operands)
    if not (a.ndim >= 2 and b.ndim >= 2 and a.shape[:-2] == b.shape[:-2] and a.shape[a_axis] == b.shape[b_axis]):
        raise _shape_error(stage, rule, **operands)


# ----------------------------------------------------------------------------------------------
# Stage 1: project. x (..., n, d) @ W (d, k) -> (..., n, k). Used for W_query, W_key, W_value,
# and by Linear with W = weight^T.


def project_forward(x: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, tuple]:
    """queries = x @ W_query (likewise keys, values). x (..., n, d), W (d, k) -> (..., n, k)."""
    if x.dtype.kind not in "fiu" or W.dtype.kind not in "fiu":
        raise _not_numbers("project_forward", x=x, W=W)
    if W.ndim != 2 or x.ndim < 1 or x.shape[-1] != W.shape[0]:
        raise _shape_error(
            "project_forward", "x (..., n, d) @ W (d, k) needs a 2-D W and x's last dim = W's first", x=x, W=W
        )
    # One matrix product over all rows: BLAS runs one large GEMM instead of one per leading index.
    out = (x.reshape(-1, x.shape[-1]) @ W).reshape(*x.shape[:-1], W.shape[1])
    return out, (x.copy(), W.copy())  # private copies: the caller may edit x or W before backward


def project_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Returns (dx (..., n, d), dW (d, k)); dW sums over every leading axis."""
    # forward: out = x @ W
    x, W = cache
    _check_grad("project_backward", d_out, x.shape[:-1] + W.shape[1:])
    d_out_rows = d_out.reshape(-1, d_out.shape[-1])
    dx = (d_out_rows @ W.T).reshape(x.shape)
    dW = x.reshape(-1, x.shape[-1]).T @ d_out_rows
    return dx, dW


def project_qkv_forward(
    x: np.ndarray, W_query: np.ndarray, W_key: np.ndarray, W_value: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple]:
    """queries, keys, values = x @ W_query, x @ W_key, x @ W_value, as one product.

    x (..., n, d), W_query and W_key (d, k), W_value (d, k_v) -> (..., n, k) twice, (..., n, k_v):
    column views of x @ [W_query, W_key, W_value]. ShapeError: a weight not 2-D with d rows, or W_key
    not as wide as W_query (the product is split at W_query's width).
    """
    sq, sk, sv = W_query.shape, W_key.shape, W_value.shape
    if not (len(sq) == 2 and sk == sq and len(sv) == 2 and x.ndim >= 1 and sq[0] == sv[0] == x.shape[-1]):
        rule = "x (..., n, d) @ W_query, W_key (d, k), W_value (d, k_v) needs d rows each and W_key as wide as W_query"
        raise _shape_error("project_qkv_forward", rule, x=x, W_query=W_query, W_key=W_key, W_value=W_value)
    if W_query.dtype.kind not in "fiu" or W_key.dtype.kind not in "fiu" or W_value.dtype.kind not in "fiu":
        raise _not_numbers("project_qkv_forward", W_query=W_query, W_key=W_key, W_value=W_value)
    qkv, cache = project_forward(x, np.concatenate((W_query, W_key, W_value), axis=1))
    k = W_query.shape[1]
    return (qkv[..., :k], qkv[..., k : 2 * k], qkv[..., 2 * k :]), cache


def project_qkv_backward(
    d_queries: np.ndarray, d_keys: np.ndarray, d_values: np.ndarray, cache: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (dx (..., n, d), dW_query, dW_key, dW_value (d, k) each).

    x feeds all three projections, so dx sums the three paths: dQ W_query^T + dK W_key^T +
    dV W_value^T = [dQ, dK, dV] @ [W_query, W_key, W_value]^T, one product.
    """
    # forward: [queries, keys, values] = x @ [W_query, W_key, W_value]
    dx, dW = project_backward(np.concatenate((d_queries, d_keys, d_values), axis=-1), tuple(cache))
    k = d_queries.shape[-1]
    return dx, dW[:, :k], dW[:, k : 2 * k], dW[:, 2 * k :]


def bias_forward(y: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, tuple]:
    """y + bias. y (..., k), bias (k,) -> (..., k)."""
    if y.dtype.kind not in "fiu" or bias.dtype.kind not in "fiu":
        raise _not_numbers("bias_forward", y=y, bias=bias)
    if bias.ndim != 1 or y.ndim < 1 or y.shape[-1] != bias.shape[0]:
        raise _shape_error(
            "bias_forward", "y (..., k) + bias (k,) needs a 1-D bias as long as y's last dim", y=y, bias=bias
        )
    return y + bias, (y.shape,)


def sum_over(d: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """``d.sum(axis)`` in ``d``'s dtype, a float16 ``d`` summed in float32 and rounded once (as
    PyTorch's CPU kernels sum half). NumPy adds the rows of a float16 array one by one in float16:
    once a column's sum reached 256 (spacing 0.25) every addend below 0.125 was lost, so 3000 rows
    of 0.1 summed to 256.0, not 300."""
    if d.dtype == np.float16:
        return d.sum(axis=axis, dtype=np.float32).astype(np.float16)
    return d.sum(axis=axis)


def bias_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Returns (dy (..., k), dbias (k,)); a float16 dbias is summed in float32 (``sum_over``)."""
    # forward: out = y + bias   (bias broadcast over every leading axis)
    _check_grad("bias_backward", d_out, cache[0])
    # a copy, not the caller's d_out: editing one gradient in place must not change the other
    return d_out.copy(), sum_over(d_out.reshape(-1, d_out.shape[-1]), 0)


# ----------------------------------------------------------------------------------------------
# Stage 2: scores. queries (..., n, k), keys (..., m, k) -> attn_scores (..., n, m).


def scores_forward(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, tuple]:
    """attn_scores = queries @ keys^T: one score per (query, key) pair."""
    rule = "queries (..., n, k) and keys (..., m, k) need the same k and the same leading dims"
    _check_matmul("scores_forward", rule, -1, -1, queries=queries, keys=keys)
    attn_scores = queries @ _T(keys)
    return attn_scores, (queries.copy(), keys.copy())  # private copies, as every stage keeps


def scores_backward(d_attn_scores: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Returns (d_queries (..., n, k), d_keys (..., m, k))."""
    # forward: attn_scores = queries @ keys^T
    queries, keys = cache
    _check_grad("scores_backward", d_attn_scores, queries.shape[:-1] + keys.shape[-2:-1])
    d_queries = d_attn_scores @ keys
    d_keys = _T(d_attn_scores) @ queries
    return d_queries, d_keys


# ----------------------------------------------------------------------------------------------
# Stage 3a (causal classes only): mask. attn_scores (..., n, m), mask (n, m) bool, True = masked.


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """The book's mask: True above the diagonal (``torch.triu(ones, diagonal=1).bool()``). (n, m).

    Raises:
        ConfigError: n or m not an integer >= 0, or a mask larger than this machine's memory.
    """
    n = check_nonnegative_int(n, "causal_mask: n")
    m = n if m is None else check_nonnegative_int(m, "causal_mask: m")
    check_allocation((n, m), bool, f"causal_mask({n}, {m})")
    return np.arange(n)[:, None] < np.arange(m)  # key j > query i; one (n, m) array, no temporaries


def mask_forward(attn_scores: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, tuple]:
    """attn_scores.masked_fill(mask, -inf): a masked key gets weight exactly 0 after softmax."""
    if not _broadcasts_to(mask.shape, attn_scores.shape):
        raise _shape_error("mask_forward", "mask must broadcast to attn_scores", attn_scores=attn_scores, mask=mask)
    return np.where(mask, attn_scores.dtype.type(-np.inf), attn_scores), (np.array(mask, copy=True),)


def mask_backward(d_masked: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (d_attn_scores,), exactly zero at masked positions."""
    # forward: masked = where(mask, -inf, attn_scores)
    (mask,) = cache
    if not _broadcasts_to(mask.shape, np.shape(d_masked)):
        raise _shape_error(
            "mask_backward", "the gradient must have the masked scores' shape", d_masked=d_masked, mask=mask
        )
    return (np.where(mask, d_masked.dtype.type(0), d_masked),)


# ----------------------------------------------------------------------------------------------
# Stage 3: scale + softmax over the keys axis. attn_scores (..., n, m) -> attn_weights (..., n, m).


def softmax(z: np.ndarray, axis: int = -1, *, dim: int | None = None) -> np.ndarray:
    """Numerically stable softmax (subtracts the row maximum; -inf entries get weight 0); ``dim`` is
    PyTorch's name for ``axis`` (giving both, different, is a ConfigError)."""
    if dim is not None:
        if axis != -1 and axis != dim:
            raise ConfigError(f"softmax: axis={axis} and dim={dim} name two axes; give one (dim is torch's name)")
        axis = dim
    if z.dtype.kind not in "fiu":
        raise _not_numbers("softmax", z=z)
    if z.ndim == 0:
        raise _shape_error("softmax", "needs at least one axis", z=z)
    if not -z.ndim <= axis < z.ndim:
        raise _shape_error("softmax", f"axis={axis} is not an axis of z", z=z)
    if z.shape[axis] == 0:
        return z.copy()
    # np.maximum.reduce and np.add.reduce are what z.max and e.sum call, without their Python layer.
    e = z - np.maximum.reduce(z, axis=axis, keepdims=True)
    e = np.exp(e, out=e) if e.dtype.kind == "f" else np.exp(e)  # in place: no temporaries
    e /= np.add.reduce(e, axis=axis, keepdims=True)
    return e


def softmax_forward(attn_scores: np.ndarray, scale: float) -> tuple[np.ndarray, tuple]:
    """attn_weights = softmax(attn_scores * scale, axis=-1); each row sums to 1 over the keys.
    ``scale`` is a finite real number (the book's 1/sqrt(k); 0 and negative values are taken as given).

    float16 scores are computed in float32 and the weights rounded once to float16. Where
    ``attn_scores * scale`` overflows the dtype from finite scores (60000 * 4 in float16 or float32's
    3e38 * 4), the product is taken in float64: the weights are the float64 answer rounded, not NaN.

    Raises:
        DTypeError: attn_scores that are not real numbers (bool, complex, ...).
        ConfigError: scale not a finite real number (NaN, inf, a string, an array)."""
    if type(attn_scores) is not np.ndarray or attn_scores.dtype.kind not in "fiu":
        if np.asarray(attn_scores).dtype.kind not in "fiu":
            raise _not_numbers("softmax_forward", attn_scores=np.asarray(attn_scores))
    scores = attn_scores.astype(np.float32) if attn_scores.dtype == np.float16 else attn_scores
    if -1.0 <= scale <= 1.0:  # |scores * scale| <= |scores|: no overflow (every module's 1/sqrt(k))
        scaled = scores * scale
    else:
        try:
            with np.errstate(over="raise"):  # only a finite product past the largest value raises
                scaled = scores * scale
        except FloatingPointError:
            scaled = scores.astype(np.float64) * scale
    attn_weights = softmax(scaled, axis=-1)
    if attn_weights.dtype != (out_dtype := np.result_type(attn_scores, scale)):
        attn_weights = attn_weights.astype(out_dtype)  # rounded once
    return attn_weights, (attn_weights.copy(), scale)  # a private copy: the caller may edit what it gets


def softmax_backward(d_attn_weights: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (d_attn_scores,) = scale * A * (dA - rowsum(dA * A)); float16 is computed in float32
    and rounded once to float16."""
    # forward: attn_weights = softmax(attn_scores * scale, axis=-1)
    attn_weights, scale = cache
    _check_grad("softmax_backward", d_attn_weights, attn_weights.shape)
    if np.result_type(d_attn_weights, attn_weights) == np.float16:
        cache32 = (attn_weights.astype(np.float32), scale)
        return (softmax_backward(d_attn_weights.astype(np.float32), cache32)[0].astype(np.float16),)
    row_dot = np.add.reduce(d_attn_weights * attn_weights, axis=-1, keepdims=True)  # rowsum(dA * A)
    d_attn_scores = scale * attn_weights * (d_attn_weights - row_dot)
    return (d_attn_scores,)


# ----------------------------------------------------------------------------------------------
# Stage 4: weights (dropout on the attention weights). (..., n, m) -> (..., n, m).


def dropout_forward(attn_weights: np.ndarray, keep: np.ndarray, p: float) -> tuple[np.ndarray, tuple]:
    """Inverted dropout: attn_weights * keep / (1 - p). keep is a bool array broadcastable to it.

    The scale is ``1 / (1 - p)`` as PyTorch's ``noise.div_(1 - p)`` computes it: in float32 for
    float16 weights (PyTorch's CPU kernels compute half in float), in the weights' dtype for
    float32 and float64 (float64 for int weights), then rounded once to that dtype; so the
    output is PyTorch's bit for bit (float16 included: 1/(1 - 0.3) is 1.429 there, not 1.428).
    The cache holds a copy of keep (the output already used it).

    Raises:
        ConfigError: p outside [0, 1), or p = 0 with a keep that drops anything. DTypeError: keep not bool.
        ShapeError: keep does not broadcast to attn_weights."""
    if not _broadcasts_to(keep.shape, attn_weights.shape):
        raise _shape_error(
            "dropout_forward", "keep must broadcast to attn_weights", attn_weights=attn_weights, keep=keep
        )
    check_keep_needs_p(keep, p, "dropout_forward: keep", "p")
    dtype = attn_weights.dtype if attn_weights.dtype.kind == "f" else np.dtype(np.float64)
    wide = np.promote_types(dtype, np.float32)  # PyTorch's opmath type: float for half
    with np.errstate(over="ignore"):  # float16 at p near 1: 1/(1 - p) is inf there, as in PyTorch
        scale = (np.ones((), dtype=wide) / np.asarray(1.0 - p, dtype=wide)).astype(dtype)
    if np.isfinite(scale):
        out = attn_weights * keep * scale
    else:  # PyTorch's noise = keep / (1 - p): 0 where dropped (never 0 * inf = NaN), inf where kept
        out = attn_weights * np.where(keep, scale, np.zeros((), dtype=dtype))
    # A private copy: editing the caller's keep before backward cannot change the gradient.
    return out, (keep.copy(), scale)


def dropout_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (d_attn_weights,) through the same mask."""
    # forward: out = attn_weights * keep / (1 - p)   (as noise = keep / (1 - p): 0 where dropped)
    keep, scale = cache
    if not _broadcasts_to(keep.shape, np.shape(d_out)):
        raise _shape_error(
            "dropout_backward", "the gradient must have the dropped weights' shape", d_out=d_out, keep=keep
        )
    scale = np.asarray(scale, dtype=d_out.dtype)
    if np.isfinite(scale):
        return (d_out * keep * scale,)
    return (d_out * np.where(keep, scale, np.zeros((), dtype=d_out.dtype)),)


# ----------------------------------------------------------------------------------------------
# Stage 5: context. attn_weights (..., n, m), values (..., m, k) -> context_vec (..., n, k).


def context_forward(attn_weights: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, tuple]:
    """context_vec = attn_weights @ values: each row a weighted average of the value vectors."""
    rule = "attn_weights (..., n, m) and values (..., m, k) need the same m and the same leading dims"
    _check_matmul("context_forward", rule, -1, -2, attn_weights=attn_weights, values=values)
    context_vec = attn_weights @ values
    return context_vec, (attn_weights.copy(), values.copy())  # private copies, as every stage keeps


def context_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Returns (d_attn_weights (..., n, m), d_values (..., m, k))."""
    # forward: context_vec = attn_weights @ values
    attn_weights, values = cache
    _check_grad("context_backward", d_context_vec, attn_weights.shape[:-1] + values.shape[-1:])
    d_attn_weights = d_context_vec @ _T(values)
    d_values = _T(attn_weights) @ d_context_vec
    return d_attn_weights, d_values


def check_head_dim(queries: np.ndarray, keys: np.ndarray, stage: str) -> None:
    """The scale 1/sqrt(k) needs k >= 1: refuse queries and keys of width 0 (ShapeError)."""
    if keys.shape[-1:] == (0,) or queries.shape[-1:] == (0,):
        raise _shape_error(stage, "queries and keys need k >= 1 (the scale is 1/sqrt(k))", queries=queries, keys=keys)


# ----------------------------------------------------------------------------------------------
# Stages 2-5 composed: scaled dot-product attention on projected queries, keys and values.


def attention_forward(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    dropout_keep: np.ndarray | None = None,
    dropout_p: float = 0.0,
    record: Recorder | None = None,
) -> tuple[np.ndarray, tuple]:
    """Stages 2 to 5: (..., n, k), (..., m, k), (..., m, kv) -> context_vec (..., n, kv).

    ``mask`` (n, m) bool, True = masked (set to -inf before the softmax); ``dropout_keep``
    (..., n, m) bool with rate ``dropout_p`` (stage 4, skipped when None; a ``dropout_p`` > 0
    without it is refused).

    Raises:
        ShapeError: operands that do not fit, or k = 0 (the scale 1/sqrt(k) is undefined).
        ConfigError: dropout_p outside [0, 1), or > 0 without dropout_keep. DTypeError: a mask that is not bool.
    """
    check_dropout(dropout_keep, dropout_p, "attention_forward")
    check_head_dim(queries, keys, "attention_forward")
    if values.shape[:-1] != keys.shape[:-1]:
        raise _shape_error(
            "attention_forward",
            "keys and values need one row per key: (..., m, k), (..., m, kv)",
            keys=keys,
            values=values,
        )
    dtypes = None
    if np.float16 in (queries.dtype, keys.dtype, values.dtype):
        # float16 scores overflow at 65504 (then inf - inf is NaN): run in float32, as kernels.attention
        # does, and round the output (and in backward the gradients) once to the inputs' dtypes
        dtypes = (queries.dtype, keys.dtype, values.dtype, np.result_type(queries, keys, values))
        queries, keys, values = (a.astype(np.float32) if a.dtype == np.float16 else a for a in (queries, keys, values))
    attn_scores, c_scores = scores_forward(queries, keys)
    if record:
        record("attn_scores", attn_scores)
    c_mask = None
    if mask is not None:
        attn_scores, c_mask = mask_forward(attn_scores, mask)
        if record:
            record("masked_scores", attn_scores)
    scale = 1.0 / math.sqrt(keys.shape[-1])
    attn_weights, c_softmax = softmax_forward(attn_scores, scale)
    if record:
        record("attn_weights", attn_weights)
    c_dropout = None
    if dropout_keep is not None:
        attn_weights, c_dropout = dropout_forward(attn_weights, dropout_keep, dropout_p)
        if record:
            record("dropped_weights", attn_weights)
    context_vec, c_context = context_forward(attn_weights, values)
    if dtypes is not None:
        context_vec = context_vec.astype(dtypes[3])
    if record:
        record("context_vec", context_vec)
    return context_vec, (c_scores, c_mask, c_softmax, c_dropout, c_context, dtypes)


def attention_backward(d_context_vec: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (d_queries, d_keys, d_values): the stages of attention_forward in reverse."""
    c_scores, c_mask, c_softmax, c_dropout, c_context, dtypes = cache
    if dtypes is not None:  # the forward ran float16 in float32
        d_context_vec = d_context_vec.astype(np.promote_types(d_context_vec.dtype, np.float32))
    d_attn_weights, d_values = context_backward(d_context_vec, c_context)
    if c_dropout is not None:
        (d_attn_weights,) = dropout_backward(d_attn_weights, c_dropout)
    (d_attn_scores,) = softmax_backward(d_attn_weights, c_softmax)
    if c_mask is not None:
        (d_attn_scores,) = mask_backward(d_attn_scores, c_mask)
    d_queries, d_keys = scores_backward(d_attn_scores, c_scores)
    if dtypes is not None:  # a gradient float16 cannot hold is refused, not turned into inf
        names = ("d_queries", "d_keys", "d_values")
        d_queries, d_keys, d_values = (
            cast(d, t, f"attention_backward: {n}") for d, t, n in zip((d_queries, d_keys, d_values), dtypes, names)
        )
    return d_queries, d_keys, d_values
