"""Backward fingerprints: which classic mistake in a hand-written backward reproduces a user's gradients?

``diagnose_backward(x, weights, grad_output, grads)`` recomputes npattn's gradients of
L = sum(output * grad_output) with respect to x, W_query, W_key and W_value, and, when the
user's gradients differ, the gradients of every mistake in ``BACKWARD_CATALOGUE``, reporting the
ones that reproduce all four of the user's tensors (to float tolerance).

Each mistake is npattn's backward with one line changed: a few options of ``backward_variant``.
The reference forward and ``backward_variant`` moved to ``npattn.debug.backvariant`` (importable from here too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn._checks import check_bool, check_positive_int, from_tensor
from npattn.debug.backvariant import _PATHS, GRAD_NAMES, attention_reference, backward_variant
from npattn.debug.tolerance import DEFAULT_RTOL, FLOAT32_RTOL, check_tolerances, low_precision
from npattn.debug.weights import check_weights, gradient_array, refuse_unknown_keys
from npattn.errors import ConfigError, ShapeError

__all__ = [
    "BACKWARD_CATALOGUE",
    "GRAD_NAMES",
    "BackwardDiagnosis",
    "BackwardMistake",
    "attention_reference",
    "backward_variant",
    "diagnose_backward",
]


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
        out += [f"  {'NOT JUDGED' if _not_judged(p) else 'WRONG'}: {p}" for p in self.problems]
        if self.first_wrong and self.problems and all(map(_not_judged, self.problems)) and not self.matches:
            out.append(f"  WRONG: d{self.first_wrong} differs from npattn's gradient beyond the tolerance")
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


LOW_PRECISION_LIMIT = 1e-2
"""A float32 (float16) gradient is judged only where that dtype carries it to better than this,
relative to its largest entry: beyond it, right and wrong code cannot be told apart in that dtype."""


def _not_judged(problem: str) -> bool:
    """A problem that says a gradient cannot be judged in its dtype (not that it is wrong)."""
    return " cannot be judged in " in problem


def _dtype_of(value: Any) -> Any:
    arr = from_tensor(value) if value is not None else None
    return arr.dtype if isinstance(arr, np.ndarray) else None


def _low_precision_rtols(
    x: np.ndarray, weights: Mapping[str, np.ndarray], grad_output: np.ndarray, settings: Mapping[str, Any],
    reference: Mapping[str, np.ndarray], dtype: np.dtype, problems: list[str],
) -> dict[str, float]:  # fmt: skip
    """Each gradient's relative tolerance in ``dtype``: ``FLOAT32_RTOL``, or 4 times the error the
    same backward computed in float32 (rounded to ``dtype``) makes on this input, where that is more
    (nearly one-hot rows with small gradients: docs/errors.md, "float32 against float64"). A
    gradient that ``dtype`` carries to worse than ``LOW_PRECISION_LIMIT`` is named in ``problems``."""
    def held(a: np.ndarray) -> np.ndarray:  # as a module of dtype holds it (float16: rounded), computed in float32
        return a.astype(dtype).astype(np.float32)

    with np.errstate(all="ignore"):
        low = backward_variant(held(x), {k: held(w) for k, w in weights.items()}, held(grad_output), **settings)
    rtols = {}
    for name in GRAD_NAMES:
        scale = float(np.max(np.abs(reference[name]), initial=0.0))
        error = float(np.max(np.abs(low[name].astype(dtype).astype(np.float64) - reference[name]), initial=0.0))
        noise = error / scale if scale else 0.0
        rtols[name] = max(FLOAT32_RTOL, 4 * noise)
        if rtols[name] > LOW_PRECISION_LIMIT:
            problems.append(
                f"d{name} cannot be judged in {dtype}: on this input {dtype} itself is off by {noise:.2g} of the "
                f"gradient's largest entry (the same backward in float32 against float64); compute it in float64"
            )
    return rtols


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
    carry, as ``npattn check`` judges them, or 4 times the error npattn's own backward makes in
    float32 on this input where that is more; a gradient float32 carries to worse than 1% on this
    input is named in ``problems`` as one that cannot be judged in it). A
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
    causal = check_bool(causal, "diagnose_backward: causal")
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
    rtols: dict[str, float] = dict.fromkeys(GRAD_NAMES, rtol)
    if atol is None and rtol == DEFAULT_RTOL and any(low_precision(grads.get(n)) for n in GRAD_NAMES):
        # gradients computed in float32 (or float16): judged to the precision they carry on this input
        low = np.float16 if any(_dtype_of(grads.get(n)) == np.float16 for n in GRAD_NAMES) else np.float32
        rtols = _low_precision_rtols(x, weights, grad_output, settings, reference, np.dtype(low), problems)
        rtol = max(rtols.values())
    unjudged = {n for n in GRAD_NAMES if any(p.startswith(f"d{n} cannot be judged") for p in problems)}
    wrong = [
        n for n in GRAD_NAMES if n in user and n not in unjudged and not _close(user[n], reference[n], atol, rtols[n])
    ]
    blocking = [p for p in problems if not _not_judged(p)]  # a missing or misshapen tensor: no mistake is named
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
            elif match is not None and wrong and not blocking:  # a judged gradient is wrong: which mistake?
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
