"""Stateless forward/backward pairs for the rest of the book's GPT (chapter 4), side by side.

Like the attention stages, every ``*_forward`` returns ``(output, cache)`` and the matching
``*_backward(d_output, cache)`` returns the gradients with respect to the forward's array inputs
that have one, in the same order (integer token ids have none). Notation: b batch, n tokens,
d = emb_dim, V = vocab_size; leading axes (...) pass through.

    layer_norm   out = scale * (x - mean) / sqrt(var + eps) + shift     over the last axis (d)
    gelu         out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    embedding    out = weight[idx]                                    (backward: scatter-add)
    add          out = x + y               the shortcut; y may broadcast over x's leading axes
    token_cross_entropy   loss = mean over tokens of -log softmax(logits)[target]

The linear layers of the feed-forward block and the output head are stage 1 (project) and the
bias stage of the attention pairs; dropout is stage 4. Shapes and dtypes are checked as in the
attention pairs (a few comparisons per call): bool, complex and other non-numbers are refused with
a DTypeError (NumPy's ``bool + bool`` is a logical or). Each cache holds its own copies of what the
backward reads (the ids, ``scale``), so editing an input after forward cannot change a gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import from_tensor
from npattn.errors import BackwardError, ConfigError, DTypeError, ShapeError
from npattn.nn.functional.attention import _not_numbers, sum_over

__all__ = [
    "GELU_SQRT_2_OVER_PI",
    "add_backward",
    "add_forward",
    "embedding_backward",
    "embedding_forward",
    "gelu_backward",
    "gelu_forward",
    "layer_norm_backward",
    "layer_norm_forward",
    "refuse_bool_ids",
    "token_cross_entropy_backward",
    "token_cross_entropy_forward",
]

GELU_SQRT_2_OVER_PI = 0.7978845238685608
"""sqrt(2/pi) as the book's GELU computes it: ``torch.sqrt(torch.tensor(2.0 / torch.pi))``, the
float32 square root of float32(2/pi) (= ``np.sqrt(np.float32(2 / np.pi))``), used unchanged in a
float64 model too (a 0-d float32 tensor does not promote a float64 one). The float32 nearest to
the true sqrt(2/pi) is one step higher, 0.7978845834732056."""

GELU_CUBIC = 0.044715
"""The cubic coefficient of the tanh approximation."""


def _check_grad(stage: str, d_out: np.ndarray, shape: tuple[int, ...]) -> None:
    """The upstream gradient must have exactly the forward output's shape (no silent broadcasting)."""
    if np.shape(d_out) != shape:
        raise ShapeError(f"{stage}: expected a gradient of shape {shape} (the forward output's), got {np.shape(d_out)}")


def _holds_bool(value: Any) -> bool:
    """Whether a (nested) list or tuple holds a bool anywhere (one pass, no array built)."""
    kinds = set(map(type, value))  # at C speed: a flat list of 2M ids in about 0.05 s
    if bool in kinds or np.bool_ in kinds:
        return True
    return bool(kinds & {list, tuple}) and any(_holds_bool(v) for v in value if isinstance(v, (list, tuple)))


def refuse_bool_ids(value: Any, arr: np.ndarray, what: str) -> None:
    """A list of ids holding True or False: NumPy reads them as 1 and 0, which a token id never means
    (a bool array is refused by its dtype).

    Raises:
        DTypeError: naming ``what`` and the first bool's position.
    """
    if isinstance(value, (list, tuple)) and arr.dtype.kind in "iu" and arr.size and _holds_bool(value):
        items = np.asarray(value, dtype=object)
        if items.shape == arr.shape:
            flags = np.asarray(np.frompyfunc(lambda v: isinstance(v, (bool, np.bool_)), 1, 1)(items), dtype=bool)
            if flags.any():
                at = tuple(int(i) for i in np.argwhere(flags)[0])
                raise DTypeError(f"{what}: expected integer token ids, got a bool ({items[at]!r}) at position {at}")


def _check_ids(stage: str, name: str, ids: Any, size: int, ignored: int | None = None) -> np.ndarray:
    """Integer ids in [0, size) as an ndarray (``ignored``: the ignore_index they may also hold, named
    in the message). Raises DTypeError (not integers, or bools in a list), ConfigError (out of range)."""
    given, ids = ids, np.asarray(ids)
    refuse_bool_ids(given, ids, f"{stage}: {name}")
    if ids.dtype.kind not in "iu":
        raise DTypeError(f"{stage}: {name} must be an integer array (token ids), got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= size):
        also = "" if ignored is None else f", or ignore_index={ignored} for a target to ignore"
        raise ConfigError(
            f"{stage}: {name} must lie in [0, {size}){also}, got values from {ids.min()} to {ids.max()}"
        )
    return ids


def _sum_to(d: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``d`` over the leading axes that broadcasting added to an operand of ``shape``."""
    extra = d.ndim - len(shape)
    return sum_over(d, tuple(range(extra))) if extra else d


# ----------------------------------------------------------------------------------------------
# Layer norm over the last axis. x (..., d), scale (d,), shift (d,) -> out (..., d).
# Biased variance (divide by d), eps inside the square root, as the book's LayerNorm.


def layer_norm_forward(
    x: np.ndarray, scale: np.ndarray, shift: np.ndarray, eps: float = 1e-5
) -> tuple[np.ndarray, tuple]:
    """out = scale * norm_x + shift, norm_x = (x - mean) / sqrt(var + eps); mean and var over the last axis.

    Raises:
        ShapeError: scale or shift not (d,). DTypeError: bool or complex operands. ConfigError: eps not > 0.
    """
    if x.dtype.kind not in "fiu" or scale.dtype.kind not in "fiu" or shift.dtype.kind not in "fiu":
        raise _not_numbers("layer_norm_forward", x=x, scale=scale, shift=shift)
    if x.ndim < 1 or scale.shape != x.shape[-1:] or shift.shape != x.shape[-1:]:
        raise ShapeError(
            f"layer_norm_forward: x (..., d) needs scale (d,) and shift (d,); "
            f"got x {x.shape}, scale {scale.shape}, shift {shift.shape}"
        )
    half = np.result_type(x, scale, shift) == np.float16
    if x.dtype == np.float16:  # statistics in float32, as torch's layer_norm for half: float16's
        x = x.astype(np.float32)  # var overflows at 65504 and its mean of ~1000 keeps 3 digits
    with np.errstate(over="ignore"):  # squares past the dtype's largest value: handled below
        mean = x.mean(axis=-1, keepdims=True)
        norm_x = x - mean  # centred; divided by std in place below
        var = (norm_x * norm_x).mean(axis=-1, keepdims=True)
    std = np.sqrt(var + var.dtype.type(eps))  # var's dtype: int x has float64 statistics
    with np.errstate(invalid="ignore"):
        norm_x /= std
    if not np.all(np.isfinite(var)):  # finite rows whose squares (or sum) overflow: each redone on its own
        rows = ~np.isfinite(var[..., 0]) & np.all(np.isfinite(x), axis=-1)
        if np.any(rows):
            norm_x[rows], std[rows] = _scaled_layer_norm(x[rows], eps)
    out = scale * norm_x
    out += shift
    if half:
        out = out.astype(np.float16)  # rounded once
    return out, (norm_x, std, scale.copy())  # the cache's own scale: editing it cannot change dx


def _scaled_layer_norm(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(norm_x, std) of finite rows x (m, d) whose statistics overflow (entries near 1e160 in float64,
    1e20 in float32): each row is divided by the power of two 2**k at its largest entry (exact), so
    that mean and var are those of x divided by 2**k and 2**2k; norm_x = centred / sqrt(var_s + eps /
    2**2k) and std = 2**k times that root (inf only where the true std is past the dtype's largest).
    A constant row is centred to exactly 0 (its mean's rounding, normalised, gave +-1) with std
    sqrt(eps), as the unscaled formula gives it."""
    x = x.astype(np.result_type(x, np.float64) if x.dtype.kind in "iu" else x.dtype, copy=False)
    _, k = np.frexp(np.max(np.abs(x), axis=-1, keepdims=True))
    one = x.dtype.type(1)
    down = np.ldexp(one, -k).astype(x.dtype)  # 2**-k
    xs = x * down
    constant = np.max(xs, axis=-1, keepdims=True) == np.min(xs, axis=-1, keepdims=True)
    centred = np.where(constant, x.dtype.type(0), xs - xs.mean(axis=-1, keepdims=True))
    with np.errstate(under="ignore"):
        root = np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + x.dtype.type(eps) * down * down)
    with np.errstate(over="ignore"):
        std = np.where(constant, np.sqrt(x.dtype.type(eps)), np.ldexp(root, k).astype(x.dtype))  # root * 2**k
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.where(constant, x.dtype.type(0), centred / root)
    return norm, std.astype(x.dtype)


def layer_norm_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (dx (..., d), dscale (d,), dshift (d,)); dscale and dshift sum over every leading axis.

    dx = (g - mean(g) - norm_x * mean(g * norm_x)) / std with g = d_out * scale, means over the last axis.
    A float16 d_out and scale are computed in float32 (the forward's norm_x and std) and the three
    gradients rounded once to float16.
    """
    # forward: out = scale * norm_x + shift,  norm_x = (x - mean) / sqrt(var + eps)
    norm_x, std, scale = cache
    _check_grad("layer_norm_backward", d_out, norm_x.shape)
    if np.result_type(d_out, scale) == np.float16 and norm_x.dtype == np.float32:
        grads = layer_norm_backward(d_out.astype(np.float32), (norm_x, std, scale.astype(np.float32)))
        return grads[0].astype(np.float16), grads[1].astype(np.float16), grads[2].astype(np.float16)
    d = norm_x.shape[-1]
    dshift = d_out.reshape(-1, d).sum(axis=0, dtype=np.result_type(d_out, norm_x))
    dscale = (d_out * norm_x).reshape(-1, d).sum(axis=0)
    g = d_out * scale
    g_mean = g.mean(axis=-1, keepdims=True)
    gn_mean = np.einsum("...j,...j->...", g, norm_x)[..., None] / d
    dx = g - g_mean
    dx -= norm_x * gn_mean
    dx /= std
    return dx, dscale, dshift


# ----------------------------------------------------------------------------------------------
# GELU, tanh approximation, elementwise. x (...) -> out (...).


def gelu_forward(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """out = 0.5 * x * (1 + tanh(c * (x + 0.044715 * x^3))), c = GELU_SQRT_2_OVER_PI.

    Integer x is computed in float64 (as NumPy's ``np.tanh`` would), float16 in float32 (rounded
    once, as PyTorch's). Finite wherever the book's
    GELU is (up to the dtype's largest value). Raises DTypeError: bool or complex x.
    """
    if x.dtype.kind != "f":
        if x.dtype.kind not in "iu":
            raise _not_numbers("gelu_forward", x=x)
        x = x.astype(np.float64)
    if x.ndim == 0:  # NumPy's arithmetic on a 0-d array gives scalars, which the steps below cannot write into
        out, (x1, t1) = gelu_forward(x.reshape(1))
        return out.reshape(()), (x1.reshape(()), t1.reshape(()))
    given = x
    if x.dtype == np.float16:  # computed in float32 and rounded once, as PyTorch's half GELU: in float16
        x = x.astype(np.float32)  # 1 + tanh(u) cancels for negative x (GELU(-4) was 0, not -7.0e-05)
    c, a = x.dtype.type(GELU_SQRT_2_OVER_PI), x.dtype.type(GELU_CUBIC)
    # The book's operations in its order, in place: t = tanh(c * (x + a * (x * x * x))), as
    # torch.pow(x, 3) multiplies x * x * x; then (0.5 * x) * (1 + t), halving first as the book
    # does, so a huge x (3e38 in float32) gives x, not inf (x * 2 would overflow).
    with np.errstate(over="ignore"):  # x^3 may overflow to inf: then t = tanh(+-inf) = +-1, as in torch
        t = x * x
        t *= x
        t *= a
        t += x
        t *= c
    np.tanh(t, out=t)
    out = x * x.dtype.type(0.5)
    out *= t + 1
    if given.dtype != x.dtype:  # float16: the backward computes in float32 from x and t too
        return out.astype(given.dtype), (x, t)
    return out, (x.copy(), t)  # a private copy: the caller may edit x before backward


def gelu_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (dx,) = d_out * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2)), t the forward's tanh."""
    # forward: out = 0.5 * x * (1 + t),  t = tanh(c * (x + 0.044715 * x^3))
    x, t = cache  # float16's x and t in float32 (see the forward)
    _check_grad("gelu_backward", d_out, x.shape)
    if x.ndim == 0:  # as in the forward: computed on one element
        (dx,) = gelu_backward(np.reshape(d_out, 1), (x.reshape(1), t.reshape(1)))
        return (dx.reshape(()),)
    half = x.dtype == np.float32 and d_out.dtype == np.float16  # computed in float32, rounded once to float16
    if half:
        d_out = d_out.astype(np.float32)
    c, a3 = x.dtype.type(GELU_SQRT_2_OVER_PI), x.dtype.type(3 * GELU_CUBIC)
    with np.errstate(over="ignore"):
        du_dx = x * x  # du/dx = c (1 + 3 a x^2)
        du_dx *= a3
        du_dx += 1
        du_dx *= c
    # du/dx overflows to inf only where |x| is so large that t = +-1 exactly (1 - t^2 = 0): the
    # largest finite value keeps 0 * du/dx at 0 there (the true gradient is 1 or 0), not NaN.
    np.minimum(du_dx, np.finfo(x.dtype).max, out=du_dx)
    dx = t * t  # dt/dx = (1 - t^2) du/dx
    np.subtract(1, dx, out=dx)
    dx *= du_dx
    dx *= x  # x dt/dx + 1 + t, then times 0.5 and the upstream gradient
    dx += t
    dx += 1
    dx *= x.dtype.type(0.5)
    dx *= d_out
    return (dx.astype(np.float16) if half else dx,)


# ----------------------------------------------------------------------------------------------
# Embedding lookup. weight (num_embeddings, d), idx (...) integers -> out (..., d).


def embedding_forward(weight: np.ndarray, idx: Any) -> tuple[np.ndarray, tuple]:
    """out = weight[idx]: row idx[...] of the table for every id (``F.embedding(idx, weight)``).

    Raises:
        ShapeError: weight not 2-D. DTypeError: idx not integers, weight bool or complex.
        ConfigError: an id outside [0, num_embeddings).
    """
    if weight.dtype.kind not in "fiu":
        raise _not_numbers("embedding_forward", weight=weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding_forward: weight must be (num_embeddings, embedding_dim), got shape {weight.shape}")
    idx = _check_ids("embedding_forward", "idx", idx, weight.shape[0])
    return weight[idx], (idx.copy(), weight.shape)  # the cache's own ids: editing idx cannot move a gradient


def embedding_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (dweight (num_embeddings, d),): row v sums d_out over every position whose id is v.

    idx has no gradient. An id used k times receives the sum of its k upstream rows (scatter-add).
    """
    # forward: out = weight[idx]
    idx, shape = cache
    _check_grad("embedding_backward", d_out, idx.shape + shape[1:])
    # float16 is added up in float32 and rounded once (sum_over: an id used often lost its small rows)
    dweight = np.zeros(shape, dtype=np.float32 if d_out.dtype == np.float16 else d_out.dtype)
    np.add.at(dweight, idx.reshape(-1), d_out.reshape(-1, shape[1]))
    return (dweight.astype(d_out.dtype, copy=False),)


# ----------------------------------------------------------------------------------------------
# Add: the shortcut connection x + shortcut, and tok_embeds + pos_embeds.
# x (..., n, d), y (n, d) or x's shape -> out (..., n, d).


def add_forward(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, tuple]:
    """out = x + y; y has x's shape or x's shape without some leading axes (broadcast over them).

    Raises ShapeError (y does not fit) and DTypeError (bool or complex operands: ``bool + bool`` is an or).
    """
    if x.dtype.kind not in "fiu" or y.dtype.kind not in "fiu":
        raise _not_numbers("add_forward", x=x, y=y)
    if y.ndim > x.ndim or x.shape[x.ndim - y.ndim :] != y.shape:
        raise ShapeError(
            f"add_forward: y must have x's shape or its trailing part (broadcast over x's leading axes); "
            f"got x {x.shape}, y {y.shape}"
        )
    return x + y, (x.shape, y.shape)


def add_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Returns (dx, dy): both receive d_out; dy sums it over the axes y was broadcast along. Both
    are new arrays: a residual's ``dx += ...`` must change neither the caller's d_out nor dy."""
    # forward: out = x + y
    x_shape, y_shape = cache
    _check_grad("add_backward", d_out, x_shape)
    dy = _sum_to(d_out, y_shape)
    return d_out.copy(), dy.copy() if np.shares_memory(dy, d_out) else dy


# ----------------------------------------------------------------------------------------------
# Cross-entropy over the vocabulary, fused with log-softmax. logits (..., V), targets (...)
# integers -> loss (). The book's ``cross_entropy(logits.flatten(0, 1), targets.flatten())``:
# the mean over every token whose target is not ``ignore_index`` (PyTorch's default -100).


def token_cross_entropy_forward(logits: np.ndarray, targets: Any, ignore_index: int = -100) -> tuple[np.ndarray, tuple]:
    """loss = mean over counted tokens of logsumexp(logits) - logits[target] (a 0-d array).

    All targets ignored: the loss is NaN (0 / 0), as in PyTorch.

    Raises:
        ShapeError: targets not of logits' shape without the last (vocabulary) axis.
        DTypeError: targets not integers; bool or complex logits (integer logits are computed in
            float64). ConfigError: a target outside [0, V) other than ignore_index.
    """
    if logits.dtype.kind != "f":
        if logits.dtype.kind not in "iu":
            raise _not_numbers("token_cross_entropy_forward", logits=logits)
        logits = logits.astype(np.float64)
    if logits.ndim < 1 or np.shape(targets) != logits.shape[:-1]:
        raise ShapeError(
            f"token_cross_entropy_forward: targets must have the logits' shape without the vocabulary axis, "
            f"{logits.shape[:-1]}; got logits {logits.shape}, targets {np.shape(targets)}"
        )
    V = logits.shape[-1]
    targets = np.asarray(targets).reshape(-1)
    counted = targets != ignore_index
    _check_ids("token_cross_entropy_forward", "targets", targets[counted], V, ignore_index)
    safe = np.where(counted, targets, 0)
    rows = np.arange(targets.size)
    z = logits.reshape(-1, V)
    shifted = z - z.max(axis=-1, keepdims=True)
    target_logit = shifted[rows, safe]
    exp = np.exp(shifted, out=shifted)  # the shifted logits are no longer needed
    sum_exp = exp.sum(axis=-1)
    nll = np.log(sum_exp) - target_logit  # -log softmax(z)[target]
    count = int(np.count_nonzero(counted))
    with np.errstate(invalid="ignore"):
        loss = np.sum(nll, where=counted) / logits.dtype.type(count)
    # softmax = exp / sum_exp: the backward divides, in the one pass it makes anyway, and turns
    # this (..., V) buffer into the gradient in place (``spent`` records that it did).
    spent = [False]
    return np.asarray(loss, dtype=logits.dtype), (exp, sum_exp, safe, counted, count, logits.shape, spent)


def token_cross_entropy_backward(d_loss: Any, cache: tuple) -> tuple[np.ndarray]:
    """Returns (dlogits (..., V),) = (softmax(logits) - one_hot(target)) * d_loss / count, 0 for ignored tokens.

    The gradient is written over the forward's (..., V) buffer (no second vocabulary-sized array),
    so each forward allows one backward, as a PyTorch graph frees its buffers after backward.

    Raises:
        ShapeError: d_loss not a scalar. DTypeError: d_loss not a real number.
        BackwardError: a second backward for the same forward.
    """
    # forward: loss = sum over counted tokens of (logsumexp(logits) - logits[target]) / count
    exp, sum_exp, safe, counted, count, shape, spent = cache
    d_kind = np.asarray(from_tensor(d_loss)).dtype.kind if d_loss is not None else "None"
    if d_kind not in "fiu" or isinstance(d_loss, (bool, np.bool_)):
        raise DTypeError(
            f"token_cross_entropy_backward: d_loss must be a real number (a float or a 0-d array), "
            f"got {type(d_loss).__name__} {d_loss!r:.40}"
        )
    d_loss = from_tensor(d_loss)
    if np.shape(d_loss) != ():
        raise ShapeError(f"token_cross_entropy_backward: expected a scalar d_loss, got shape {np.shape(d_loss)}")
    if spent[0]:
        raise BackwardError(
            "token_cross_entropy_backward: this forward's buffers were already used by a backward "
            "(the gradient is written over them); run token_cross_entropy_forward again"
        )
    spent[0] = True
    dtype = exp.dtype
    weight = (counted * (np.asarray(d_loss, dtype=dtype) / dtype.type(max(count, 1)))).astype(dtype)
    dlogits = np.multiply(exp, (weight / sum_exp)[:, None], out=exp)  # softmax(logits) * weight
    dlogits[np.arange(safe.size), safe] -= weight
    return (dlogits.reshape(shape),)
