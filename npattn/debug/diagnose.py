"""Bug fingerprints: which classic self-attention mistake reproduces a user's output?

``diagnose(x, weights, output)`` recomputes the reference from x and the three weight matrices,
and, when the user's output differs, recomputes the output of every mistake in ``CATALOGUE``
and reports the ones that reproduce it (to float tolerance). It also reports symptoms that need
no catalogue: an output of the wrong shape, NaN/inf, or a context vector outside the range of
the value vectors (a correct context vector is a convex combination of value vectors).

Each mistake is the reference pipeline with one thing changed, so the catalogue is a list of
small variations of one function, ``attention_variant``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn import _html
from npattn._checks import as_array, check_bool
from npattn.debug.predict import ShapeCheck, check_shapes, predict_shapes
from npattn.debug.tolerance import (
    FLOAT16_ROUNDING,
    FORWARD_RTOL,
    allowed_error,
    check_tolerances,
    column_allowed,
    column_largest,
    forward_rtol,
    rounding_allowance,
)
from npattn.debug.weights import all_float64, check_single_head, check_weights_and_biases, to_numpy, weights_of
from npattn.nn import functional as F

__all__ = ["CATALOGUE", "Diagnosis", "Mistake", "Symptom", "attention_variant", "diagnose"]
__all__ += ["FLOAT16_NOISE", "float16_noise", "not_judged_reason", "within_float16_noise"]


def _T(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def attention_variant(
    x: np.ndarray,
    W_query: np.ndarray,
    W_key: np.ndarray,
    W_value: np.ndarray,
    *,
    causal: bool = False,
    scores: str = "queries @ keys^T",
    scale: str = "1/sqrt(d_out)",
    normalise: str = "softmax over keys",
    weights: str = "attn_weights",
    context: str = "values",
    biases: Sequence[Any] = (0.0, 0.0, 0.0),
) -> np.ndarray:
    """Self-attention with one choice per stage; the defaults are the correct pipeline.

    x (..., n, d_in), W_* (d_in, d_out) -> (..., n, d_out); ``biases`` (b_query, b_key, b_value),
    each (d_out,), are added to the projections (qkv_bias=True). The choices:
        scores:    "queries @ keys^T" | "keys @ queries^T" | "queries @ values^T"
        scale:     "1/sqrt(d_out)" | "1" | "1/sqrt(d_in)" | "1/d_out"
        normalise: "softmax over keys" | "softmax over queries" | "none" | "divide by row sum"
        weights:   "attn_weights" | "attn_weights^T"
        context:   "values" | "keys" | "x" (the unprojected inputs: (..., n, d_in) out)
    """
    d_in, d_out = W_query.shape
    queries, keys, values = (F.project_forward(x, W)[0] + b for W, b in zip((W_query, W_key, W_value), biases))
    left, right = {
        "queries @ keys^T": (queries, keys),
        "keys @ queries^T": (keys, queries),
        "queries @ values^T": (queries, values),
    }[scores]
    attn_scores, _ = F.scores_forward(left, right)
    if causal:
        attn_scores, _ = F.mask_forward(attn_scores, F.causal_mask(*attn_scores.shape[-2:]))
    tau = {"1/sqrt(d_out)": 1 / math.sqrt(d_out), "1": 1.0, "1/sqrt(d_in)": 1 / math.sqrt(d_in), "1/d_out": 1 / d_out}[
        scale
    ]
    if normalise == "softmax over keys":
        attn_weights, _ = F.softmax_forward(attn_scores, tau)
    elif normalise == "softmax over queries":
        attn_weights = F.softmax(attn_scores * tau, axis=-2)
    elif normalise == "none":
        attn_weights = np.where(np.isneginf(attn_scores), 0.0, attn_scores * tau)
    elif normalise == "divide by row sum":  # section 3.3.1's naive normalisation
        kept = np.where(np.isneginf(attn_scores), 0.0, attn_scores)
        with np.errstate(divide="ignore", invalid="ignore"):
            attn_weights = kept / np.sum(kept, axis=-1, keepdims=True)
    else:
        raise ValueError(f"unknown normalise choice {normalise!r}")
    if weights == "attn_weights^T":
        attn_weights = _T(attn_weights)
    context_vec, _ = F.context_forward(attn_weights, {"values": values, "keys": keys, "x": x}[context])
    return context_vec


FLOAT16_NOISE = 4.0
"""A float16 output within this many times float16's own error on the input (``float16_noise``) is
not judged: right and wrong code cannot be told apart there in float16."""


def float16_noise(
    x64: np.ndarray,
    weights: Sequence[np.ndarray],
    biases: Sequence[Any],
    reference: np.ndarray,
    *,
    causal: bool = False,
    num_heads: int = 1,
) -> np.ndarray:
    """What a correct forward computed in float16 may be off by, per output column (d_out,):
    ``FLOAT16_NOISE`` times the larger of npattn's own float16 forward's error on this input (x, the
    weights (d_in, d_out) and biases (d_out,) rounded to float16; heads side by side in d_out) and
    float16's rounding (``FLOAT16_ROUNDING`` of the column's largest reference value). Code that
    computes in float16 throughout (torch's ``.half()``) errs by 1 to 3 times npattn's own error."""
    def half(a: Any) -> np.ndarray:
        return np.asarray(a, dtype=np.float64).astype(np.float16)

    d_out = weights[0].shape[1]
    heads = [slice(i * d_out // num_heads, (i + 1) * d_out // num_heads) for i in range(num_heads)]
    with np.errstate(all="ignore"):
        out16 = np.concatenate(
            [attention_variant(half(x64), *(half(W[:, c]) for W in weights), causal=causal,
                               biases=[half(b)[c] for b in biases]) for c in heads],
            axis=-1,
        )  # fmt: skip
        error = column_largest(out16.astype(np.float64) - reference)
    return FLOAT16_NOISE * np.maximum(error, FLOAT16_ROUNDING * column_largest(reference))


def within_float16_noise(
    x64: np.ndarray,
    weights: Sequence[np.ndarray],
    biases: Sequence[Any] | None,
    output: Any,
    reference: np.ndarray,
    *,
    causal: bool = False,
    num_heads: int = 1,
) -> np.ndarray | None:
    """``float16_noise`` when ``output`` is a float16 array shaped like ``reference``, finite and within
    it in every column (right and wrong code cannot be told apart there); else None. ``biases``
    None: none (zeros)."""
    out = np.asarray(output)
    if out.dtype != np.float16 or out.shape != reference.shape or not np.all(np.isfinite(out)):
        return None
    if biases is None:
        biases = [np.zeros(weights[0].shape[1])] * 3
    noise = float16_noise(x64, weights, biases, reference, causal=causal, num_heads=num_heads)
    return noise if bool(np.all(np.abs(out.astype(np.float64) - reference) <= noise)) else None


def not_judged_reason(noise: np.ndarray) -> str:
    """What a NOT JUDGED float16 verdict says (``noise``: ``float16_noise`` of the output's columns)."""
    return (
        "a float16 output, off by more than float16's rounding (0.05% of a column's largest value) but by no "
        f"more than float16 arithmetic itself may be on this input (up to {float(np.max(noise, initial=0.0)):.2g}, "
        f"{FLOAT16_NOISE:g} times npattn's own float16 forward's error): right and wrong code cannot be told "
        "apart there (a mistake of 0.1% hides in it); compute and return float32 or float64 to have it judged"
    )


@dataclass(frozen=True)
class Mistake:
    """A catalogued mistake: a stable identifier, a one-line explanation, and how to reproduce it."""

    identifier: str
    explanation: str
    variant: Mapping[str, str]
    causal_only: bool = False
    self_only: bool = False  # a mistake of self-attention code: it applies the causal mask

    def reproduce(
        self,
        x: np.ndarray,
        W_query: np.ndarray,
        W_key: np.ndarray,
        W_value: np.ndarray,
        causal: bool,
        biases: Sequence[Any] = (0.0, 0.0, 0.0),
    ) -> np.ndarray:
        """The output this mistake gives on x with these weights (and biases)."""
        options = dict(self.variant)
        causal = (causal and not self.causal_only) or self.self_only  # the mistake is the mask, missing or there
        return attention_variant(x, W_query, W_key, W_value, causal=causal, biases=biases, **options)


CATALOGUE: tuple[Mistake, ...] = (
    Mistake(
        "softmax_wrong_axis",
        "softmax normalised over the queries (axis -2, dim=1 of a batch) instead of over the keys (the last axis)",
        {"normalise": "softmax over queries"},
    ),
    Mistake("missing_scale", "scores not scaled by 1/sqrt(d_out) before the softmax", {"scale": "1"}),
    Mistake("scale_by_d_in", "scores scaled by 1/sqrt(d_in) instead of 1/sqrt(d_out)", {"scale": "1/sqrt(d_in)"}),
    Mistake("scale_not_sqrt", "scores divided by d_out instead of sqrt(d_out)", {"scale": "1/d_out"}),
    Mistake("swapped_query_key", "scores computed as keys @ queries^T (= (Q K^T)^T)", {"scores": "keys @ queries^T"}),
    Mistake("keys_from_values", "scores built from the values: queries @ values^T", {"scores": "queries @ values^T"}),
    Mistake("no_softmax", "scaled scores used as weights without a softmax", {"normalise": "none"}),
    Mistake(
        "naive_normalisation",
        "scores divided by their row sum instead of a softmax (section 3.3.1's naive normalisation)",
        {"normalise": "divide by row sum"},
    ),
    Mistake("context_from_keys", "the weights applied to the keys instead of the values", {"context": "keys"}),
    Mistake("weights_transposed", "context computed as attn_weights^T @ values", {"weights": "attn_weights^T"}),
    Mistake(
        "values_not_projected",
        "the weights applied to the inputs x instead of the values x @ W_value (section 3.3's version)",
        {"context": "x"},
    ),
    Mistake("missing_causal_mask", "no causal mask: every token also attends to the tokens after it", {}, True),
    Mistake(
        "unexpected_causal_mask",
        "a causal mask where self-attention has none: this is causal attention (section 3.5); a function of "
        "(x, W_query, W_key, W_value) is checked as self-attention: check causal code as a class whose "
        "constructor takes context_length",
        {},
        self_only=True,
    ),
)


@dataclass(frozen=True)
class Symptom:
    """A property of the output that is wrong whatever the mistake was."""

    identifier: str
    message: str


@dataclass
class Diagnosis:
    """What ``diagnose`` found. ``matches`` lists the catalogued mistakes that reproduce the output.

    ``correct`` is True when the output equals the reference; ``matches`` is then empty.
    ``not_judged`` (``correct`` False) says why a float16 output is neither right nor wrong: off by
    more than float16's rounding, but within what float16 arithmetic itself errs on this input.
    ``symptoms`` holds catalogue-free findings (``shape_mismatch``, ``non_finite``,
    ``outside_value_range``); ``indistinguishable`` the mistakes that give the correct answer on
    this input (so this input cannot rule them out, e.g. scale_not_sqrt when d_out = 1).
    """

    correct: bool
    matches: tuple[str, ...]
    symptoms: tuple[Symptom, ...]
    indistinguishable: tuple[str, ...]
    max_abs_diff: float | None
    expected: np.ndarray
    output: np.ndarray
    shape_check: ShapeCheck
    causal: bool = False
    tolerance: tuple[float, float] = (0.0, FORWARD_RTOL)
    candidates: tuple[str, ...] = field(default=())
    label: str = ""  # the kind of attention, when not (causal) self-attention
    not_judged: str = ""  # why a float16 output is neither passed nor failed (``not_judged_reason``)

    @property
    def identifiers(self) -> tuple[str, ...]:
        """Every identifier reported: the matching mistakes, then the symptoms."""
        return self.matches + tuple(s.identifier for s in self.symptoms)

    def explain(self, identifier: str) -> str:
        for mistake in CATALOGUE:
            if mistake.identifier == identifier:
                return mistake.explanation
        for symptom in self.symptoms:
            if symptom.identifier == identifier:
                return symptom.message
        raise KeyError(identifier)

    def __str__(self) -> str:
        kind = self.label or ("causal self-attention" if self.causal else "self-attention")
        lines = [f"diagnosis ({kind}, reference recomputed from x and the three weight matrices):"]
        if self.correct:
            lines.append(f"  correct: the output equals the reference (max |diff| {self.max_abs_diff:.1e})")
        elif self.not_judged:
            lines.append(f"  NOT JUDGED: max |output - reference| = {self.max_abs_diff:.4g}: {self.not_judged}")
        elif self.max_abs_diff is not None:
            lines.append(f"  WRONG: max |output - reference| = {self.max_abs_diff:.4g}")
        else:
            lines.append("  WRONG: the output cannot be compared with the reference")
        if self.matches:
            lines.append("  the output is reproduced exactly by:")
            lines += [f"    {m}: {self.explain(m)}" for m in self.matches]
        elif not self.correct and self.candidates and not self.not_judged:
            lines.append(f"  no catalogued mistake reproduces it ({len(self.candidates)} tried)")
        if self.symptoms:
            lines.append("  symptoms:")
            lines += [f"    {s.identifier}: {s.message}" for s in self.symptoms]
        if self.indistinguishable:
            lines.append(
                "  not ruled out (on this input they give the correct answer too): " + ", ".join(self.indistinguishable)
            )
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = [[m, "WRONG", self.explain(m)] for m in self.matches]
        rows += [[s.identifier, "WRONG", s.message] for s in self.symptoms]
        verdict = "ok" if self.correct else "NOT JUDGED" if self.not_judged else "WRONG"
        diff = "-" if self.max_abs_diff is None else f"{self.max_abs_diff:.3e}"
        parts = [_html.table(["output", "max |output - reference|"], [[verdict, diff]], caption="diagnosis")]
        if rows:
            parts.append(_html.table(["identifier", "", "what it means"], rows))
        return _html.wrap(*parts, text=str(self))


def _close(a: np.ndarray, b: np.ndarray, atol: float | None, rtol: float, rounding: Any = 0.0) -> bool:
    """Equal shapes and |a - b| <= max(atol + rtol * max|b[..., j]|, rounding[j]) in every column j
    (``column_allowed``; NaN equal only to NaN)."""
    if a.shape != b.shape:
        return False
    return bool(np.all(np.isclose(a, b, rtol=0.0, atol=column_allowed(b, atol, rtol, rounding), equal_nan=True)))


def _outside_value_range(output: np.ndarray, values: np.ndarray, atol: Any) -> Symptom | None:
    """A context vector must lie, column by column, between the smallest and largest value vector."""
    if output.shape != values.shape or output.shape[-2] == 0:
        return None
    low = np.min(values, axis=-2, keepdims=True)
    high = np.max(values, axis=-2, keepdims=True)
    excess = np.maximum(low - output, output - high)  # > 0 outside the range
    excess = np.where(np.isfinite(excess), excess, 0.0)
    if not np.any(excess > atol):
        return None
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    *lead, row, col = (int(i) for i in worst)
    column = (*lead, 0, col)  # the column's range in this batch entry
    lo, hi = float(low[column]), float(high[column])
    where = f"row {row + 1}, column {col + 1}" + (f" (batch {lead[0]})" if lead else "")
    count = int(np.count_nonzero(np.any(excess > atol, axis=-1)))
    return Symptom(
        "outside_value_range",
        f"{count} context vector(s) leave the range of the value vectors: {where} is {float(output[worst]):.4f}, "
        f"outside [{lo:.4f}, {hi:.4f}]; a correct context vector is a weighted average of value vectors "
        "(weights >= 0 summing to 1 over the keys)",
    )


def diagnose(
    x: Any,
    weights: Mapping[str, Any],
    output: Any,
    *,
    causal: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    catalogue: Sequence[Mistake] = CATALOGUE,
) -> Diagnosis:
    """Tell which known mistake, if any, produced ``output``.

    Args:
        x: the input the user's implementation received, (n, d_in) or (b, n, d_in).
        weights: ``{"W_query", "W_key", "W_value"}`` -> (d_in, d_out) arrays and, with qkv_bias,
            ``"W_query.bias"`` ... -> (d_out,) (a state dict works; ``"W_query.weight"`` keys of
            Linear layers are transposed), or a module holding them (``weights_of(module)``).
        output: what the user's implementation returned for x with these weights.
        causal: the implementation is meant to be causal (section 3.5); adds ``missing_causal_mask``.
        atol, rtol: "equals" and "reproduces exactly" mean |output - candidate| <= atol + rtol *
            max|candidate[..., j]| in each output column j (atol unset: 0, so each column is judged
            relative to its own magnitude; a float32 or float16 output is then also allowed its
            dtype's documented rounding, ``tolerance.rounding_allowance``).

    Returns:
        Diagnosis; ``matches`` lists every mistake that reproduces the output (several when they
        coincide on this input), empty when the output is correct or no known mistake matches.
        A float16 output (atol unset) off by more than float16's rounding but within
        ``float16_noise`` is neither: ``correct`` False, ``not_judged`` saying why.

    Raises:
        ConfigError: a weight is missing, or x or a weight holds NaN or inf; atol or rtol negative
            or not finite, or so wide that an output off by 0.1% would pass; the weights of a module
            with several heads or an out_proj (``weights_of(MultiHeadAttention)``), which diagnose
            does not model. ShapeError, DTypeError:
            x or the weights do not fit.
    """
    atol, given = check_tolerances(atol, FORWARD_RTOL if rtol is None else rtol, "diagnose")
    causal = check_bool(causal, "diagnose: causal")
    check_single_head(weights_of(weights), "diagnose")  # a state dict's out_proj.* counts too
    x64, (Wq, Wk, Wv), biases = check_weights_and_biases(x, weights)
    raw = as_array(to_numpy(output), "output")
    rtol = forward_rtol(None if rtol is None else given, atol, all_float64(x, weights), raw)  # unset: by precision
    out = np.asarray(raw, dtype=np.float64)
    expected = attention_variant(x64, Wq, Wk, Wv, causal=causal, biases=biases)
    allowed_error(expected, atol, rtol, "diagnose")  # refuses a tolerance too wide for these outputs
    queries, keys, values = (x64 @ W + b for W, b in zip((Wq, Wk, Wv), biases))
    # atol unset: the output is also allowed its dtype's documented rounding, column by column
    rounding = 0.0 if atol is not None else rounding_allowance(raw, queries, keys, values, expected, causal=causal)
    prediction = predict_shapes(x64.shape[-2], Wq.shape[0], Wq.shape[1], batch=x64.shape[0] if x64.ndim == 3 else None)
    shape_check = check_shapes(prediction, out)
    candidates = [m for m in catalogue if (causal or not m.causal_only) and not (causal and m.self_only)]
    symptoms: list[Symptom] = []
    if out.shape != expected.shape:
        symptoms.append(
            Symptom(
                "shape_mismatch",
                f"output shape {out.shape}, expected {expected.shape}"
                + ("; " + "; ".join(shape_check.advice) if shape_check.advice else ""),
            )
        )
        max_diff = None
    else:
        with np.errstate(invalid="ignore"):
            diff = np.where(out == expected, 0.0, np.abs(out - expected))
        max_diff = float(np.max(np.where(np.isnan(diff), np.inf, diff), initial=0.0))
    if not np.all(np.isfinite(out)):
        bad = int(out.size - np.count_nonzero(np.isfinite(out)))
        symptoms.append(Symptom("non_finite", f"the output is non-finite: {bad} of {out.size} entries are NaN or inf"))
    correct = _close(out, expected, atol, rtol, rounding) and bool(np.all(np.isfinite(out)))  # non-finite never passes
    matches: list[str] = []
    indistinguishable: list[str] = []
    with np.errstate(all="ignore"):
        for mistake in candidates:
            wrong = mistake.reproduce(x64, Wq, Wk, Wv, causal, biases)
            if _close(wrong, expected, atol, rtol, rounding):
                indistinguishable.append(mistake.identifier)
            elif not correct and _close(out, wrong, atol, rtol, rounding):
                matches.append(mistake.identifier)
    not_judged = ""
    if not correct and atol is None and not matches and not symptoms:  # float16's own error: neither right nor wrong
        noise = within_float16_noise(x64, (Wq, Wk, Wv), biases, raw, expected, causal=causal)
        if noise is not None:
            rounding, not_judged = noise, not_judged_reason(noise)
    if not correct:
        outside = _outside_value_range(out, values, column_allowed(values, atol, rtol, rounding))
        if outside is not None:
            symptoms.append(outside)
            not_judged = ""
    return Diagnosis(
        correct=correct,
        matches=tuple(matches),
        symptoms=tuple(symptoms),
        indistinguishable=tuple(indistinguishable),
        max_abs_diff=max_diff,
        expected=expected,
        output=out,
        shape_check=shape_check,
        causal=causal,
        tolerance=(atol or 0.0, rtol),
        candidates=tuple(m.identifier for m in candidates),
        not_judged=not_judged,
    )
