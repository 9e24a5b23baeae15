"""The multi-head reshapes and the wrapper's concatenation, each with its backward (the inverse
reshape or split). Shapes: b batch, n tokens, h heads, hd = head_dim, d_out = h * hd."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npattn.errors import ShapeError
from npattn.nn.functional.attention import _check_grad, _shape_error

__all__ = [
    "concat_backward",
    "concat_forward",
    "merge_heads_backward",
    "merge_heads_forward",
    "split_heads_backward",
    "split_heads_forward",
]


# ----------------------------------------------------------------------------------------------
# Multi-head reshapes: their backward is the inverse reshape.


def split_heads_forward(x: np.ndarray, num_heads: int) -> tuple[np.ndarray, tuple]:
    """(b, n, d_out) -> (b, num_heads, n, head_dim): ``x.view(b, n, h, hd).transpose(1, 2)``.

    Raises:
        ConfigError: num_heads not a positive integer. ShapeError: x not 3-D or d_out not divisible."""
    if x.ndim != 3 or x.shape[-1] % num_heads:
        raise _shape_error("split_heads_forward", f"x must be (b, n, d_out) with d_out divisible by {num_heads}", x=x)
    b, n, d_out = x.shape
    out = x.reshape(b, n, num_heads, d_out // num_heads).transpose(0, 2, 1, 3)
    return out, (x.shape,)


def split_heads_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (dx (b, n, d_out),)."""
    # forward: out = x.reshape(b, n, h, hd).transpose(0, 2, 1, 3)
    (shape,) = cache
    b, n, width = shape
    if d_out.ndim != 4 or (d_out.shape[0], d_out.shape[2], d_out.shape[1] * d_out.shape[3]) != (b, n, width):
        raise _shape_error(
            "split_heads_backward", f"expected a gradient (b={b}, h, n={n}, hd) with h * hd = {width}", d_out=d_out
        )
    dx = d_out.transpose(0, 2, 1, 3).reshape(shape)  # a copy, except for one head or one token: then a view
    return (dx.copy() if np.may_share_memory(dx, d_out) else dx,)


def merge_heads_forward(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """(b, h, n, hd) -> (b, n, h * hd): ``x.transpose(1, 2).contiguous().view(b, n, d_out)``."""
    if x.ndim != 4:
        raise _shape_error("merge_heads_forward", "x must be (b, h, n, hd)", x=x)
    b, h, n, hd = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * hd), (x.shape,)


def merge_heads_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    """Returns (dx (b, h, n, hd),)."""
    # forward: out = x.transpose(0, 2, 1, 3).reshape(b, n, h * hd)
    (shape,) = cache
    b, h, n, hd = shape
    _check_grad("merge_heads_backward", d_out, (b, n, h * hd))
    return (d_out.reshape(b, n, h, hd).transpose(0, 2, 1, 3).copy(),)  # never a view of d_out


def concat_forward(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, tuple]:
    """``torch.cat(arrays, dim=-1)``: the wrapper's head outputs side by side."""
    if not arrays or any(a.ndim < 1 or a.shape[:-1] != arrays[0].shape[:-1] for a in arrays):
        shapes = [a.shape for a in arrays]
        raise ShapeError(f"concat_forward: needs one or more arrays equal in all but the last axis; got {shapes}")
    widths = [a.shape[-1] for a in arrays]
    return np.concatenate(arrays, axis=-1), (widths,)


def concat_backward(d_out: np.ndarray, cache: tuple) -> tuple[np.ndarray, ...]:
    """Returns one gradient per concatenated array."""
    # forward: out = concatenate(arrays, axis=-1)
    (widths,) = cache
    if np.ndim(d_out) < 1 or np.shape(d_out)[-1] != sum(widths):
        raise _shape_error("concat_backward", f"expected a gradient whose last axis is {sum(widths)} wide", d_out=d_out)
    return tuple(part.copy() for part in np.split(d_out, np.cumsum(widths)[:-1], axis=-1))  # not views of d_out
