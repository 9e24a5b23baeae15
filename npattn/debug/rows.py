"""The single-token check (the book's section 3.4): every token's context vector computed on its own,
one query at a time, against the batched output's row (causal and per head as the module is)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from npattn._checks import as_array, check_bool, check_positive_int
from npattn.debug.diagnose import float16_noise
from npattn.debug.formulas import WEIGHT_NAMES, kind_of
from npattn.debug.tolerance import (
    FORWARD_RTOL,
    allowed_error,
    check_tolerances,
    column_allowed,
    forward_rtol,
    largest,
    rounding_allowance,
)
from npattn.debug.trace import Trace, trace
from npattn.debug.weights import ModuleWeights, all_float64, check_weights_and_biases, to_numpy, weights_of
from npattn.errors import ConfigError, ShapeError
from npattn.nn import functional as F
from npattn.nn.attention import (
    MultiHeadAttentionWrapper,
)
from npattn.nn.layers import Dropout
from npattn.nn.module import Module
from npattn.nn.passes import kept_forward

__all__ = ["RowCheck", "check_rows", "check_rows_of", "single_token_context"]


@dataclass
class RowCheck:
    """Each token's context vector computed on its own vs the batched output's row. ``atol`` is the
    largest difference allowed in each output column, (d_out,) (``check_rows``: atol + rtol *
    max|expected[..., j]|, or the output dtype's rounding), or one number for every column."""

    expected: np.ndarray
    output: np.ndarray
    row_diffs: np.ndarray
    atol: np.ndarray | float
    tokens: Sequence[str] | None = None
    note: str = ""  # how the output was made (e.g. a module run in eval mode), printed last
    float32: bool = False  # atol is the output dtype's documented rounding (a float32 or float16 output)
    dtype: str = "float32"  # the output's dtype, as returned (``output`` is its float64 copy)
    noise: np.ndarray | float = 0.0  # a float16 output: what float16 arithmetic itself may err by (``float16_noise``)

    def _diffs(self) -> np.ndarray:
        """|expected - output| per entry, NaN as inf (never passes)."""
        with np.errstate(invalid="ignore"):
            diffs = np.abs(self.expected - self.output)
        return np.where(np.isnan(diffs), np.inf, diffs)

    def _over(self) -> np.ndarray:
        """How far each entry is over its column's allowance (> 1: fails; inf for any difference
        where nothing is allowed)."""
        diffs = self._diffs()
        allowed = np.broadcast_to(np.asarray(self.atol, dtype=np.float64), diffs.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(diffs == 0, 0.0, np.where(allowed > 0, diffs / np.where(allowed > 0, allowed, 1), np.inf))

    @property
    def worst_row(self) -> tuple[int, ...]:
        """Index of the worst row: (row,) or (batch, row): the largest difference, or when some rows
        fail, the row furthest over its columns' allowance."""
        if self.row_diffs.size == 0:
            return (0,)
        scores = np.max(self._over(), axis=-1) if not self.passed else self.row_diffs
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(scores)), self.row_diffs.shape))

    @property
    def max_diff(self) -> float:
        return float(np.max(self.row_diffs)) if self.row_diffs.size else 0.0

    @property
    def bad_rows(self) -> list[tuple[int, ...]]:
        if self.row_diffs.size == 0:
            return []
        return [tuple(int(i) for i in idx) for idx in np.argwhere(np.any(self._over() > 1, axis=-1))]

    @property
    def passed(self) -> bool:
        return not self.bad_rows and bool(np.all(np.isfinite(self.output)))

    @property
    def not_judged(self) -> bool:
        """A float16 output whose rows fail float16's rounding but lie within ``noise``: neither right nor wrong."""
        return not self.passed and bool(np.any(self.noise)) and bool(np.all(self._diffs() <= self.noise))

    def __bool__(self) -> bool:
        return self.passed

    def _row_name(self, idx: tuple[int, ...]) -> str:
        row = idx[-1]
        name = f"row {row + 1}"
        if self.tokens is not None and row < len(self.tokens):
            name += f" ({self.tokens[row]})"
        return name if len(idx) == 1 else f"batch {idx[0]}, {name}"

    def __str__(self) -> str:
        if self.row_diffs.size == 0:
            return "single-token check: no rows to compare"
        worst = self.worst_row
        exp = ", ".join(f"{v:.4f}" for v in self.expected[worst])
        got = ", ".join(f"{v:.4f}" for v in self.output[worst])
        n_bad, n_all = len(self.bad_rows), self.row_diffs.size
        verdict = "PASSED" if self.passed else f"FAILED ({n_bad} of {n_all} rows differ)"
        if self.not_judged:
            verdict = (
                f"NOT JUDGED ({n_bad} of {n_all} rows differ by more than float16's rounding, by no more than "
                f"float16 arithmetic itself may: up to {float(np.max(self.noise)):.2g})"
            )
        non_finite = int(self.output.size - np.count_nonzero(np.isfinite(self.output)))
        if non_finite:
            verdict += f"; the output is non-finite: {non_finite} of {self.output.size} entries are NaN or inf"
        row_over = self._over()[worst]
        col = int(np.argmax(row_over if not self.passed else self._diffs()[worst]))
        allowed = float(np.broadcast_to(np.asarray(self.atol, dtype=np.float64), row_over.shape)[col])
        where = f" in column {col + 1}" if np.ndim(self.atol) and not self.passed else ""
        return (
            f"single-token check (each token's context vector computed on its own, section 3.4): {verdict}\n"
            f"  worst: {self._row_name(worst)}: on its own [{exp}], batched [{got}], "
            f"max |diff| {float(self._diffs()[worst][col]):.3e}{where} (allowed {allowed:.1e}"
            + (f", {self.dtype}'s rounding)" if self.float32 else ")")
            + (f"\n  {self.note}" if self.note else "")
        )

    __repr__ = __str__


def single_token_context(
    x: np.ndarray,
    W_query: np.ndarray,
    W_key: np.ndarray,
    W_value: np.ndarray,
    i: int,
    *,
    causal: bool = False,
    biases: Sequence[Any] = (0.0, 0.0, 0.0),
) -> np.ndarray:
    """The book's step-by-step computation for token i of x (n, d_in): context vector (d_out,).
    ``biases``: (b_query, b_key, b_value), each (d_out,), added to the projections (qkv_bias=True)."""
    b_query, b_key, b_value = biases
    query_i = x[i] @ W_query + b_query  # (d_out,)
    keys = x @ W_key + b_key  # (n, d_out)
    values = x @ W_value + b_value  # (n, d_out)
    if causal:  # token i sees tokens 0..i only
        keys, values = keys[: i + 1], values[: i + 1]
    attn_scores_i = query_i @ keys.T  # (n,)
    attn_weights_i = F.softmax(attn_scores_i / math.sqrt(keys.shape[-1]))  # (n,), sums to 1
    return attn_weights_i @ values  # (d_out,)


def check_rows(
    x: Any,
    weights: Mapping[str, Any] | Any,
    output: Any,
    *,
    causal: bool = False,
    num_heads: int = 1,
    atol: float | None = None,
    rtol: float | None = None,
    tokens: Sequence[str] | None = None,
) -> RowCheck:
    """The seed's verification: every row of the batched ``output`` against the same token's
    context vector computed on its own (x (n, d_in) or (b, n, d_in); output like x with d_out
    columns). ``weights`` is a mapping or an object holding W_query/W_key/W_value, and their
    biases where it has them (``"W_query.bias"`` keys, or Linear layers with biases).

    ``num_heads`` > 1: the weights' d_out columns are ``num_heads`` heads side by side (head i
    uses columns i * d_out/num_heads onwards), each computed on its own and concatenated: the
    output of MultiHeadAttentionWrapper (with its heads' weights concatenated) or the
    ``merged_heads`` stage of MultiHeadAttention (before out_proj).

    A row passes when |row - its own computation| <= atol + rtol * max|expected[..., j]| in each
    column j (atol unset: 0, so each column is judged relative to its own magnitude, and a wrong
    column of small values fails next to large ones; a float32 or float16 output is then also
    allowed its dtype's documented rounding, ``tolerance.rounding_allowance``).

    Raises:
        ShapeError: ``output`` does not have the shape (..., n, d_out) the weights give.
        ConfigError: num_heads not a positive integer dividing d_out; atol or rtol negative or not
            finite, or so wide that an output off by 0.1% would pass; ``tokens`` not one name per
            token of x.
    """
    atol, given = check_tolerances(atol, FORWARD_RTOL if rtol is None else rtol, "check_rows")
    causal = check_bool(causal, "check_rows: causal")
    if not isinstance(weights, ModuleWeights):  # a state dict's out_proj.* marks it, as a module's does
        weights = weights_of(weights)
    x64, (Wq, Wk, Wv), biases = check_weights_and_biases(x, weights)
    if isinstance(output, (Trace, Module)):
        raise ConfigError(
            f"check_rows: output is a {type(output).__name__}, not an array; pass the module's output (a "
            "Trace's trace['context_vec'] or trace['merged_heads']), or check a module on x with "
            "npattn.check_rows_of(module, x)"
        )
    raw = as_array(to_numpy(output), "output")
    rtol = forward_rtol(None if rtol is None else given, atol, all_float64(x, weights), raw)  # unset: by precision
    out = np.asarray(raw, dtype=np.float64)
    d_out = Wq.shape[1]
    h = check_positive_int(num_heads, "num_heads")
    if d_out % h:
        raise ConfigError(f"num_heads={h} does not divide the weights' d_out={d_out}")
    if isinstance(weights, ModuleWeights) and weights.num_heads and weights.num_heads != h:
        raise ConfigError(
            f"check_rows: these are the weights of a {weights.source} with num_heads={weights.num_heads}, "
            f"checked with num_heads={h}; pass num_heads={weights.num_heads} (or use npattn.check_rows_of(module, x))"
        )
    if tokens is not None:
        tokens = list(tokens)
        if len(tokens) != x64.shape[-2]:
            raise ConfigError(
                f"check_rows: tokens has {len(tokens)} names for {x64.shape[-2]} tokens (rows of x); "
                "give one name per token, in order"
            )
    expected_shape = (*x64.shape[:-1], d_out)
    if out.shape != expected_shape:
        raise ShapeError(f"output: expected shape {expected_shape} (one row of d_out per token), got {out.shape}")
    flat_x = x64.reshape(-1, *x64.shape[-2:])
    heads = [slice(i * d_out // h, (i + 1) * d_out // h) for i in range(h)]
    expected = np.stack(
        [
            np.stack(
                [
                    np.concatenate(
                        [
                            single_token_context(
                                xb, Wq[:, c], Wk[:, c], Wv[:, c], i, causal=causal, biases=[b[c] for b in biases]
                            )
                            for c in heads
                        ]
                    )
                    for i in range(xb.shape[0])
                ]
            )
            if xb.shape[0]
            else np.zeros((0, d_out))
            for xb in flat_x
        ]
    ).reshape(expected_shape)
    with np.errstate(invalid="ignore"):
        diffs = np.abs(expected - out)
    row_diffs = np.max(np.where(np.isnan(diffs), np.inf, diffs), axis=-1, initial=0.0)  # NaN never passes
    allowed_error(expected, atol, rtol, "check_rows")  # refuses a tolerance too wide for these outputs
    rounding: np.ndarray | float = 0.0
    if atol is None:  # the output is also allowed its dtype's documented rounding, column by column
        q, k, v = (x64 @ W + b for W, b in zip((Wq, Wk, Wv), biases))
        rounding = rounding_allowance(raw, q, k, v, expected, causal=causal, num_heads=h)
    tolerance = column_allowed(expected, atol, rtol, rounding)
    by_rounding = bool(np.any(np.asarray(rounding) > column_allowed(expected, atol, rtol)))
    by_rounding = by_rounding and raw.dtype in (np.float16, np.float32)
    noise: np.ndarray | float = 0.0
    if atol is None and raw.dtype == np.float16:
        noise = float16_noise(x64, (Wq, Wk, Wv), biases, expected, causal=causal, num_heads=h)
    if isinstance(weights, ModuleWeights) and weights.out_proj is not None and np.any(diffs > tolerance):
        W_out, b_out = weights.out_proj
        projected = expected @ W_out + (0.0 if b_out is None else b_out)
        if np.allclose(out, projected, rtol=1e-4, atol=1e-4 * max(largest(projected), 1e-300)):
            raise ConfigError(
                f"check_rows: output is the {weights.source}'s output after out_proj, but check_rows checks "
                "merged_heads, the rows before it (every head's context vectors side by side): pass "
                "npattn.trace(module, x)['merged_heads'], or use npattn.check_rows_of(module, x)"
            )
    return RowCheck(
        expected, out, row_diffs, tolerance, tokens, float32=by_rounding, dtype=str(raw.dtype), noise=noise
    )


def check_rows_of(
    module: Module,
    x: Any,
    output: Any = None,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    tokens: Sequence[str] | None = None,
) -> RowCheck:
    """``check_rows`` for one of npattn's attention classes (causal when it is, per head when it has
    heads). ``output``: the module's output on x, or a Trace of it (default: run the module).
    For MultiHeadAttention the rows checked are the ``merged_heads`` stage (before out_proj): its
    ``output`` must be a Trace or None (its output after out_proj is refused).
    The module runs in eval mode here (each token on its own is computed without dropout), then
    goes back to its mode; the report's note says so when dropout was on.

    Raises:
        ConfigError: not one of npattn's attention classes; an array ``output`` of MultiHeadAttention.
    """
    kind = kind_of(module)
    if kind is None:
        raise ConfigError(f"check_rows_of knows npattn's attention classes, got {type(module).__name__}")
    if kind == "multihead" and output is not None and not isinstance(output, Trace):
        raise ConfigError(
            "check_rows_of(MultiHeadAttention, x, output): the rows checked are the merged_heads stage, before "
            "out_proj, which the module's output does not show; pass a Trace of it (npattn.trace(module, x)) "
            f"or no output (the module is run here), got {type(output).__name__}"
        )
    p = max((m.p for m in module.modules() if isinstance(m, Dropout)), default=0.0)
    note = ""
    run_here = output is None
    if module.training and p > 0:
        if run_here:  # run here: in eval mode, since each token on its own is computed without dropout
            note = f"note: the module ran in eval mode (dropout={p:g} off) for this check, then back in training mode"
        else:
            note = (
                f"note: the module is in training mode with dropout={p:g}: an output of a training forward has "
                "dropped attention weights, which the single-token check does not; pass an output of module.eval()"
            )
    if run_here:  # a check: the module's mode and its last forward (what backward differentiates) are kept
        training = module.training
        module.eval()
        try:
            with kept_forward(module):
                output = trace(module, x) if kind == "multihead" else module(x)
        finally:
            module.train(training)
    if isinstance(output, Trace):
        output = output["merged_heads"] if kind == "multihead" else output.output
    heads: Any = module.heads if isinstance(module, MultiHeadAttentionWrapper) else [module]
    per_head = [weights_of(head) for head in heads]
    weights = {n: np.concatenate([W[n] for W in per_head], axis=1) for n in WEIGHT_NAMES}
    for n in WEIGHT_NAMES:  # qkv_bias=True: each head's biases, side by side like its weights
        if f"{n}.bias" in per_head[0]:
            weights[f"{n}.bias"] = np.concatenate([W[f"{n}.bias"] for W in per_head])
    num_heads = getattr(module, "num_heads", 1)
    causal = kind != "self"
    report = check_rows(x, weights, output, causal=causal, num_heads=num_heads, atol=atol, rtol=rtol, tokens=tokens)
    report.note = note
    return report
