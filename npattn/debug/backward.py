"""Backward fingerprints: which classic mistake in a hand-written backward reproduces a user's gradients?

``diagnose_backward(x, weights, grad_output, grads)`` recomputes npattn's gradients of
L = sum(output * grad_output) with respect to x, W_query, W_key and W_value, and, when the
user's gradients differ, the gradients of every mistake in ``BACKWARD_CATALOGUE``, reporting the
ones that reproduce all four of the user's tensors (to float tolerance).

Each mistake is npattn's backward with one line changed, so the catalogue is a list of small
variations of one function, ``backward_variant``, composed from the stage pairs of
``npattn.functional`` (the derivations: docs/derivations.md). Attention here is single-head
self-attention, causal attention (the mask as -inf before the softmax, or section 3.5.1's
softmax-then-mask-and-renormalise form), with dropout from a known keep mask, and multi-head
causal attention without an output projection, all with (d_in, d_out) weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn._checks import check_positive_int
from npattn.debug.tolerance import DEFAULT_RTOL, FLOAT32_RTOL, check_tolerances, low_precision
from npattn.debug.weights import check_weights, gradient_array, refuse_unknown_keys
from npattn.errors import ConfigError, ShapeError
from npattn.nn import functional as F

__all__ = [
    "BACKWARD_CATALOGUE",
    "GRAD_NAMES",
    "BackwardDiagnosis",
    "BackwardMistake",
    "attention_reference",
    "backward_variant",
    "diagnose_backward",
]

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


@dataclass(frozen=True)
class BackwardMistake:
    """A catalogued backward mistake: an identifier, a one-line explanation, and the variants
    (a detail and ``backward_variant`` options each) that reproduce it.

    ``needs``: "" (any attention), "causal", "dropout" or "multihead".
    """

    identifier: str
    explanation: str
    variants: tuple[tuple[str, Mapping[str, Any]], ...]
    needs: str = ""


def _one(options: Mapping[str, Any]) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    return (("", options),)


def _missing_paths() -> tuple[tuple[str, Mapping[str, Any]], ...]:
    variants = []
    for kept in ((0, 1), (0, 2), (1, 2), (0,), (1,), (2,)):
        missing = [_PATHS[i] for i in range(3) if i not in kept]
        detail = f"the {' and '.join(missing)} path{'s' if len(missing) > 1 else ''} missing"
        variants.append((detail, {"dx_paths": tuple(_PATHS[i] for i in kept)}))
    return tuple(variants)


BACKWARD_CATALOGUE: tuple[BackwardMistake, ...] = (
    BackwardMistake(
        "softmax_backward_no_rowsum",
        "softmax backward dS = scale * A * dA: the dot-product term - A * rowsum(dA * A) is missing",
        _one({"softmax": "no_rowsum"}),
    ),
    BackwardMistake(
        "softmax_backward_diagonal",
        "softmax backward dS = scale * A * (1 - A) * dA: only the Jacobian's diagonal (no -A_ij A_il terms)",
        _one({"softmax": "diagonal"}),
    ),
    BackwardMistake(
        "softmax_backward_identity",
        "softmax backward dS = scale * dA: the gradient passed straight through the softmax",
        (("", {"softmax": "identity"}), ("masked positions not zeroed", {"softmax": "identity", "mask_zeroed": False})),
    ),
    BackwardMistake(
        "softmax_backward_missing_scale",
        "softmax backward without the scale: dS = A * (dA - rowsum(dA * A)), the forward's 1/sqrt(d_k) left out",
        _one({"softmax_scale": "none"}),
    ),
    BackwardMistake(
        "softmax_backward_wrong_axis",
        "softmax backward with rowsum(dA * A) taken over the queries (axis -2) instead of the keys (the last axis)",
        _one({"softmax": "wrong_axis"}),
    ),
    BackwardMistake(
        "scores_backward_no_transpose",
        "scores backward dK = dS @ Q instead of dS^T @ Q (the transpose missing)",
        _one({"d_keys": "dS @ Q"}),
    ),
    BackwardMistake(
        "context_backward_wrong_weights",
        "context backward dV = S^T @ G from the pre-softmax scores instead of A^T @ G from the attention weights",
        _one({"d_values": "S^T @ G"}),
    ),
    BackwardMistake(
        "dx_missing_path",
        "dX sums fewer than the three paths dQ @ W_query^T + dK @ W_key^T + dV @ W_value^T",
        _missing_paths(),
    ),
    BackwardMistake(
        "dW_transposed",
        "dW computed as dQ^T @ x, (d_out, d_in), and reshaped (not transposed) to W's (d_in, d_out)",
        _one({"dW": "reshape(d^T @ x)"}),
    ),
    BackwardMistake("grad_doubled", "every gradient twice its true value", _one({"factor": 2.0})),
    BackwardMistake(
        "mask_backward_not_zeroed",
        "section 3.5.1's form (softmax, times the lower-triangular mask, rows renormalised): the backward "
        "does not zero the masked positions (dA = dB instead of dB * tril)",
        _one({"causal_form": "renormalise", "mask_zeroed": False}),
        "causal",
    ),
    BackwardMistake(
        "dropout_backward_scale",
        "dropout backward scaled by 1/p instead of 1/(1 - p)",
        _one({"dropout_scale": "1/p"}),
        "dropout",
    ),
    BackwardMistake(
        "head_split_no_transpose",
        "the head split of dQ, dK, dV undone by a reshape (b, h, n, head_dim) -> (b, n, d_out) without the transpose",
        _one({"heads": "reshape"}),
        "multihead",
    ),
    BackwardMistake(
        "scale_by_d_out_not_head_dim",
        "softmax backward scaled by 1/sqrt(d_out) instead of 1/sqrt(head_dim)",
        _one({"softmax_scale": "1/sqrt(d_out)"}),
        "multihead",
    ),
)


@dataclass
class BackwardDiagnosis:
    """What ``diagnose_backward`` found.

    ``correct``: every tensor equals npattn's gradient. ``matches``: (identifier, detail) of the
    mistakes that reproduce every tensor. ``first_wrong``: the first tensor (x, W_query, W_key,
    W_value) that differs; ``non_finite``: tensors holding NaN or inf; ``problems``: tensors
    missing or of the wrong shape; ``indistinguishable``: mistakes that give the correct
    gradients on this input.
    """

    correct: bool
    matches: tuple[tuple[str, str], ...]
    first_wrong: str | None
    non_finite: tuple[str, ...]
    problems: tuple[str, ...]
    indistinguishable: tuple[str, ...]
    candidates: tuple[str, ...] = field(default=())
    tolerance: tuple[float, float] = (1e-8, 1e-6)

    @property
    def identifiers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m for m, _ in self.matches))

    @staticmethod
    def explain(identifier: str) -> str:
        return next(m.explanation for m in BACKWARD_CATALOGUE if m.identifier == identifier)

    def lines(self) -> list[str]:
        if self.correct:
            return ["  correct: every gradient equals npattn's"]
        out = []
        if self.non_finite:
            out.append(f"  WRONG: NaN or inf in {', '.join(self.non_finite)}")
        out += [f"  WRONG: {p}" for p in self.problems]
        if self.matches:
            out.append("  your gradients are reproduced exactly by:")
            for identifier, detail in self.matches:
                out.append(f"    {identifier}: {self.explain(identifier)}" + (f" ({detail})" if detail else ""))
        elif not self.non_finite and not self.problems:
            out.append(
                f"  wrong, no catalogued mistake reproduces it ({len(self.candidates)} tried); "
                f"the first wrong tensor: d{self.first_wrong}"
            )
        if self.indistinguishable:
            out.append(
                "  not ruled out (they give the correct gradients on this input): " + ", ".join(self.indistinguishable)
            )
        return out

    def __str__(self) -> str:
        return "\n".join(["backward diagnosis:", *self.lines()])

    __repr__ = __str__


def _close(a: np.ndarray, b: np.ndarray, atol: float | None, rtol: float) -> bool:
    scale = float(np.max(np.abs(b), initial=0.0))
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= (atol or 0.0) + rtol * scale))


def _reproduce(
    mistake: BackwardMistake,
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    grad_output: np.ndarray,
    settings: Mapping[str, Any],
    forms: tuple[str, ...],
    user: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    atol: float | None,
    rtol: float,
) -> str | None:
    """The detail of the first variant of ``mistake`` reproducing ``user``; "correct" when the
    mistake's main variant (in the first form) gives the reference gradients; None otherwise.

    Causal attention tries every form (the masked_fill and the renormalise one), because a learner
    writes either; in the renormalise form the softmax's rowsum term is redundant, so only the
    first form can tell whether a mistake is visible on this input.
    """
    for k, (detail, options) in enumerate(mistake.variants):
        for j, form in enumerate(forms if "causal_form" not in options else (options["causal_form"],)):
            got = backward_variant(x, weights, grad_output, **settings, **{"causal_form": form, **options})
            if k == j == 0 and all(_close(got[n], reference[n], atol, rtol) for n in GRAD_NAMES):
                return "correct"
            if len(user) == len(GRAD_NAMES) and all(_close(user[n], got[n], atol, rtol) for n in GRAD_NAMES):
                return detail
    return None


def diagnose_backward(
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    grad_output: np.ndarray,
    grads: Mapping[str, Any],
    *,
    causal: bool = False,
    num_heads: int | None = None,
    keep: np.ndarray | None = None,
    p: float = 0.0,
    atol: float | None = None,
    rtol: float = DEFAULT_RTOL,
) -> BackwardDiagnosis:
    """Name the catalogued mistake(s) that reproduce ``grads`` ({"x", "W_query", "W_key", "W_value"}).

    "Reproduce" means |grad - candidate| <= atol + rtol * max|candidate| in every tensor (atol
    unset: 0, so each tensor is judged relative to its own magnitude; with the default tolerances,
    gradients in float32 or float16 are judged with rtol = ``FLOAT32_RTOL``, the precision they
    carry, as ``npattn check`` judges them). A
    tensor missing (None), of the wrong shape or not a real array (complex, strings, ...) is
    reported in ``problems``; NaN or inf in ``non_finite``; then no mistake is named.

    Raises:
        ConfigError: ``grads`` not a mapping or holding an unknown key, a weight missing, x or a weight not finite, or
            num_heads not dividing d_out. ShapeError: x, the weights, ``grad_output`` or ``keep``
            of shapes that do not fit together; ``num_heads`` with an x that is not (batch, n, d_in).
    """
    if not isinstance(grads, Mapping):
        raise ConfigError(
            'grads: expected a mapping {"x": dx, "W_query": dW_query, "W_key": dW_key, "W_value": dW_value}, '
            f"got {type(grads).__name__}"
        )
    refuse_unknown_keys(grads, GRAD_NAMES, "grads")
    atol, rtol = check_tolerances(atol, rtol, "diagnose_backward")
    x64, *Ws = check_weights(x, weights)
    x, weights = x64, dict(zip(GRAD_NAMES[1:], Ws))
    d_out = Ws[0].shape[1]
    if num_heads is not None:
        num_heads = check_positive_int(num_heads, "diagnose_backward: num_heads")
    if num_heads and x.ndim != 3:
        raise ShapeError(
            f"num_heads={num_heads}: multi-head attention needs x of shape (batch, n, d_in), got shape {x.shape} "
            "(add a batch axis: x[None])"
        )
    if num_heads and d_out % num_heads:
        raise ConfigError(f"num_heads={num_heads}: d_out={d_out} must be divisible by it")
    expected = (*x.shape[:-1], d_out)
    G = np.asarray(grad_output)
    if G.shape != expected or G.dtype.kind not in "fiu":
        raise ShapeError(
            f"grad_output: expected a real array of the output's shape {expected}, got shape {G.shape}, dtype {G.dtype}"
        )
    grad_output = G.astype(np.float64)
    weights_shape = attention_reference(x, weights, causal=causal, num_heads=num_heads)[1].shape
    if keep is not None and np.shape(keep) != weights_shape:
        raise ShapeError(f"keep: expected the attention weights' shape {weights_shape}, got {np.shape(keep)}")
    settings = {"causal": causal, "num_heads": num_heads, "keep": keep, "p": p}
    reference = backward_variant(x, weights, grad_output, **settings)  # type: ignore[arg-type]
    user: dict[str, np.ndarray] = {}
    problems, non_finite = [], []
    for name in GRAD_NAMES:
        arr, problem = gradient_array(grads.get(name), reference[name].shape)
        if arr is None:
            if problem == "missing":
                problems.append(f"no gradient for {name}")
            elif problem.startswith("shape"):
                problems.append(f"d{name} has shape {problem[6:]}, expected {reference[name].shape} ({name}'s shape)")
            else:
                problems.append(f"d{name} is {problem}")
            continue
        if not np.all(np.isfinite(arr)):
            non_finite.append(f"d{name}")
        user[name] = arr
    if atol is None and rtol == DEFAULT_RTOL and any(low_precision(grads.get(n)) for n in GRAD_NAMES):
        rtol = FLOAT32_RTOL  # gradients computed in float32 (or float16): judged to the precision they carry
    wrong = [n for n in GRAD_NAMES if n in user and not _close(user[n], reference[n], atol, rtol)]
    first_wrong = wrong[0] if wrong else None
    correct = not wrong and not problems
    needs = {"", *(["causal"] if causal else []), *(["dropout"] if keep is not None else [])}
    needs |= {"multihead"} if num_heads else set()
    candidates = [m for m in BACKWARD_CATALOGUE if m.needs in needs]
    forms = ("masked_fill", "renormalise") if causal else ("masked_fill",)
    matches: list[tuple[str, str]] = []
    indistinguishable: list[str] = []
    with np.errstate(all="ignore"):
        for mistake in candidates:
            match = _reproduce(mistake, x, weights, grad_output, settings, forms, user, reference, atol, rtol)
            if match == "correct":
                indistinguishable.append(mistake.identifier)
            elif match is not None and not correct and not problems:
                matches.append((mistake.identifier, match))
    return BackwardDiagnosis(
        correct=correct,
        matches=tuple(dict.fromkeys(matches)),
        first_wrong=first_wrong,
        non_finite=tuple(non_finite),
        problems=tuple(problems),
        indistinguishable=tuple(dict.fromkeys(indistinguishable)),
        candidates=tuple(m.identifier for m in candidates),
        tolerance=(atol or 0.0, rtol),
    )
