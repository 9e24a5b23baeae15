"""npattn's attention backward with one choice per line: the variants ``npattn.debug.backward`` catalogues.

``backward_variant(x, weights, grad_output, **choices)`` returns the gradients of
L = sum(output * grad_output) with respect to x, W_query, W_key and W_value. With the default
choices it is npattn's backward; each catalogued mistake changes one line of it. It and
``attention_reference``, the forward it differentiates, are composed from the stage pairs of
``npattn.functional`` (the derivations: docs/derivations.md). Attention here is single-head
self-attention, causal attention (the mask as -inf before the softmax, or section 3.5.1's
softmax-then-mask-and-renormalise form), with dropout from a known keep mask, and multi-head
causal attention without an output projection, all with (d_in, d_out) weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from npattn.nn import functional as F

__all__ = ["GRAD_NAMES", "attention_reference", "backward_variant"]

GRAD_NAMES = ("x", "W_query", "W_key", "W_value")
_PATHS = ("query", "key", "value")


def _T(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


@dataclass
class _Forward:
    """Every intermediate array of the reference forward, for the backward variants."""

    x: np.ndarray
    W: tuple[np.ndarray, np.ndarray, np.ndarray]
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray]  # per head when multi-head: (b, h, n, hd)
    splits: tuple[Any, ...]
    attn_scores: np.ndarray  # queries @ keys^T, before the mask
    mask: np.ndarray | None
    attn_weights: np.ndarray  # after the softmax (and the mask)
    dropped: np.ndarray
    keep: np.ndarray | None
    p: float
    scale: float
    merge: Any
    output: np.ndarray


def _forward(
    x: np.ndarray, W: Sequence[np.ndarray], causal: bool, num_heads: int | None, keep: np.ndarray | None, p: float
) -> _Forward:
    Wq, Wk, Wv = W
    projected = [F.project_forward(x, w)[0] for w in (Wq, Wk, Wv)]
    splits: tuple[Any, ...] = ()
    if num_heads:
        pairs = [F.split_heads_forward(t, num_heads) for t in projected]
        projected = [t for t, _ in pairs]
        splits = tuple(c for _, c in pairs)
    queries, keys, values = projected
    attn_scores, _ = F.scores_forward(queries, keys)
    mask = F.causal_mask(*attn_scores.shape[-2:]) if causal else None
    masked = F.mask_forward(attn_scores, mask)[0] if mask is not None else attn_scores
    scale = 1.0 / math.sqrt(keys.shape[-1])
    attn_weights, _ = F.softmax_forward(masked, scale)
    dropped = F.dropout_forward(attn_weights, keep, p)[0] if keep is not None else attn_weights
    context_vec, _ = F.context_forward(dropped, values)
    merge = None
    if num_heads:
        context_vec, merge = F.merge_heads_forward(context_vec)
    return _Forward(
        x,
        (Wq, Wk, Wv),
        (queries, keys, values),
        splits,
        attn_scores,
        mask,
        attn_weights,
        dropped,
        keep,
        p,
        scale,
        merge,
        context_vec,
    )


def attention_reference(
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    *,
    causal: bool = False,
    num_heads: int | None = None,
    keep: np.ndarray | None = None,
    p: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """npattn's forward: (output, attn_weights before dropout) for the attention ``backward_variant`` knows.

    x (n, d_in) or (b, n, d_in); multi-head (``num_heads``) needs a batch and gives attn_weights
    (b, num_heads, n, n); ``keep`` is the dropout keep mask of the attention weights, rate ``p``.
    """
    f = _forward(x, [weights[n] for n in GRAD_NAMES[1:]], causal, num_heads, keep, p)
    return f.output, f.attn_weights


def backward_variant(
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    grad_output: np.ndarray,
    *,
    causal: bool = False,
    num_heads: int | None = None,
    keep: np.ndarray | None = None,
    p: float = 0.0,
    causal_form: str = "masked_fill",
    softmax: str = "full",
    softmax_scale: str = "forward",
    mask_zeroed: bool = True,
    d_keys: str = "dS^T @ Q",
    d_values: str = "A^T @ G",
    dropout_scale: str = "1/(1-p)",
    heads: str = "transpose",
    dW: str = "x^T @ d",
    dx_paths: tuple[str, ...] = _PATHS,
    factor: float = 1.0,
) -> dict[str, np.ndarray]:
    """Gradients of sum(output * grad_output) w.r.t. x and the weights, with one choice per line.

    The defaults are npattn's backward. The choices:
        causal_form:   "masked_fill" (scores masked to -inf) | "renormalise" (section 3.5.1: softmax,
                       times the lower-triangular mask, rows renormalised; the same forward)
        softmax:       "full" dS = tau A (dA - rowsum(dA A)) | "no_rowsum" tau A dA |
                       "diagonal" tau A (1 - A) dA | "identity" tau dA | "wrong_axis" (rowsum over queries)
        softmax_scale: "forward" (tau of the forward) | "none" | "1/sqrt(d_out)"
        mask_zeroed:   the mask's backward zeroes the masked positions
        d_keys:        "dS^T @ Q" | "dS @ Q";  d_values: "A^T @ G" | "S^T @ G" (raw scores)
        dropout_scale: "1/(1-p)" | "1/p";  heads: "transpose" | "reshape" (undo the split without it)
        dW:            "x^T @ d" | "reshape(d^T @ x)";  dx_paths: the projections dX sums over
        factor:        every gradient multiplied by it
    """
    W = [np.asarray(weights[n]) for n in GRAD_NAMES[1:]]
    f = _forward(x, W, causal, num_heads, keep, p)
    queries, keys, values = f.qkv
    G = F.merge_heads_backward(grad_output, f.merge)[0] if num_heads else grad_output
    # context_vec = dropped @ values
    dA = G @ _T(values)
    dV = _T(f.dropped) @ G if d_values == "A^T @ G" else _T(f.attn_scores) @ G
    if f.keep is not None:  # dropped = attn_weights * keep / (1 - p)
        dA = dA * f.keep * (1.0 / (1.0 - p) if dropout_scale == "1/(1-p)" else 1.0 / p)
    A = f.attn_weights
    if f.mask is not None and causal_form == "renormalise":  # A = B / rowsum(B), B = softmax(tau S) * tril
        A = F.softmax(f.attn_scores * f.scale)
        row_sum = np.sum(np.where(f.mask, 0.0, A), axis=-1, keepdims=True)
        dB = (dA - np.sum(dA * f.attn_weights, axis=-1, keepdims=True)) / row_sum
        dA = np.where(f.mask, 0.0, dB) if mask_zeroed else dB
    tau = {"forward": f.scale, "none": 1.0, "1/sqrt(d_out)": 1.0 / math.sqrt(W[0].shape[1])}[softmax_scale]
    if softmax == "full":
        (dS,) = F.softmax_backward(dA, (A, tau))
    elif softmax == "wrong_axis":
        dS = tau * A * (dA - np.sum(dA * A, axis=-2, keepdims=True))
    else:
        dS = tau * {"no_rowsum": A * dA, "diagonal": A * (1 - A) * dA, "identity": dA}[softmax]
    if f.mask is not None and causal_form == "masked_fill" and mask_zeroed:
        (dS,) = F.mask_backward(dS, (f.mask,))
    # attn_scores = queries @ keys^T
    dQ, dK = F.scores_backward(dS, (queries, keys))
    if d_keys == "dS @ Q":
        dK = dS @ queries
    grads = [dQ, dK, dV]
    if num_heads:
        if heads == "transpose":
            grads = [F.split_heads_backward(g, c)[0] for g, c in zip(grads, f.splits)]
        else:
            grads = [g.reshape(c[0]) for g, c in zip(grads, f.splits)]
    out: dict[str, np.ndarray] = {"x": np.zeros_like(x)}
    for path, name, w, g in zip(_PATHS, GRAD_NAMES[1:], W, grads):
        dx_path, dW_path = F.project_backward(g, (x, w))
        if dW != "x^T @ d":
            dW_path = (g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])).reshape(w.shape)
        out[name] = dW_path * factor
        if path in dx_paths:
            out["x"] = out["x"] + dx_path
    out["x"] = out["x"] * factor
    return {n: out[n] for n in GRAD_NAMES}
