"""compare(reference, candidate, x): two implementations stage by stage, the largest difference per
stage and the first stage whose values diverge, with a hint of what that usually means."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from npattn import _html
from npattn.debug.formulas import format_shape, format_table, formula_of
from npattn.debug.tolerance import FORWARD_RTOL, allowed_error, check_tolerances, column_allowed
from npattn.debug.trace import Trace, trace
from npattn.debug.weights import refuse_biases, to_numpy, weights_of
from npattn.errors import ConfigError
from npattn.nn.module import Module

__all__ = ["Comparison", "StageDiff", "compare"]


@dataclass(frozen=True)
class StageDiff:
    name: str
    reference_shape: tuple[int, ...] | None
    candidate_shape: tuple[int, ...] | None
    max_diff: float | None  # None when the shapes differ or one side lacks the stage
    allowed: float

    @property
    def compared(self) -> bool:
        return self.reference_shape is not None and self.candidate_shape is not None

    @property
    def diverged(self) -> bool:
        if not self.compared:
            return False
        return self.max_diff is None or not self.max_diff <= self.allowed


_AFTER_DIVERGENCE = {
    "x": "the two implementations were not given the same input",
    "queries": "the query projection differs: check W_query and x @ W_query",
    "keys": "the key projection differs: check W_key and x @ W_key",
    "values": "the value projection differs: a mistake only in the values changes the context vectors "
    "but leaves the weights alone",
    "attn_scores": "queries and keys agree but the scores do not: check queries @ keys^T (which is transposed, "
    "which projection feeds it)",
    "masked_scores": "the causal mask differs: check which entries are set to -inf (above the diagonal)",
    "attn_weights": "the scores agree but the weights do not: check the scale 1/sqrt(d_k) and the softmax axis "
    "(over keys, the last axis)",
    "dropped_weights": "the dropout differs: use the same dropout mask, or eval mode, to compare",
    "context_vec": "the weights and values agree but the context vectors do not: check attn_weights @ values "
    "(not transposed, not the keys)",
    "merged_heads": "the per-head context vectors agree but the merged ones do not: transpose(1, 2) back to "
    "(b, n, num_heads, head_dim) before the reshape to (b, n, d_out)",
    "out_proj": "the merged heads agree but the output does not: check out_proj (weight transposed, the bias)",
}


@dataclass
class Comparison:
    """Per-stage max |reference - candidate|, in the reference's stage order."""

    stages: list[StageDiff]

    @property
    def first_divergence(self) -> str | None:
        return next((s.name for s in self.stages if s.diverged), None)

    @property
    def passed(self) -> bool:
        return self.first_divergence is None and any(s.compared for s in self.stages)

    def __bool__(self) -> bool:
        return self.passed

    def __getitem__(self, name: str) -> StageDiff:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def _hint(self, name: str) -> str:
        """What the seed says about a first divergence at ``name``, if the stages it reads agreed."""
        prefix, _, plain = name.rpartition(".")  # heads.1.attn_weights: head 1's attn_weights
        prefix += "." if prefix else ""
        # x is the same for both by construction; the weights (and out_proj's own Linear) are not stages
        reads = [prefix + r for r in formula_of(plain)[1] if r not in ("x", plain) and not r.startswith("W_")]
        unchecked = [r for r in reads if not any(s.name == r and s.compared for s in self.stages)]
        if unchecked:
            return (
                f"the stages it reads ({', '.join(unchecked)}) were not compared, so the mistake is at "
                f"{name} or before it: record them too to narrow it down"
            )
        return _AFTER_DIVERGENCE.get(plain, "look at this stage")

    def _rows(self) -> list[list[str]]:
        first = self.first_divergence
        rows = []
        for s in self.stages:
            if not s.compared:
                diff, verdict = "-", "only in " + ("reference" if s.reference_shape is not None else "candidate")
            elif s.max_diff is None:
                diff = "-"
                verdict = f"SHAPE {format_shape(s.reference_shape)} vs {format_shape(s.candidate_shape)}"
            else:
                diff, verdict = f"{s.max_diff:.3e}", "ok" if not s.diverged else "DIVERGES"
            if s.name == first:
                verdict += "  <- first divergence"
            shape = format_shape(s.reference_shape if s.reference_shape is not None else s.candidate_shape)
            rows.append([s.name, shape, diff, verdict])
        return rows

    def _verdict(self) -> str:
        first = self.first_divergence
        if first is None:
            return "all compared stages agree" if self.passed else "no stage in common to compare"
        return f"first diverging stage: {first}: {self._hint(first)}"

    def __str__(self) -> str:
        return "\n".join([*format_table(["stage", "shape", "max |diff|", ""], self._rows()), self._verdict()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        table = _html.table(["stage", "shape", "max |diff|", ""], self._rows(), caption="compare")
        return _html.wrap(table, text=self._verdict())


Implementation = Module | Trace | Callable[..., Any]


def _stages_of(impl: Implementation, x: Any, weights: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
    """name -> array for a Module (traced), a Trace, or a function returning an array or a mapping."""
    if isinstance(impl, Module):
        impl = trace(impl, x)
    if isinstance(impl, Trace):
        found: dict[str, np.ndarray] = {}
        for stage in impl.stages:
            found.setdefault(stage.qualname, stage.array)
        if "context_vec" not in found and impl.output is not None:
            found["context_vec"] = to_numpy(impl.output)
        return found
    if not callable(impl):
        raise ConfigError(f"compare expects a Module, a Trace or a function, got {type(impl).__name__}")
    if weights is not None:
        W = weights_of(weights)
        refuse_biases(W)  # the function is handed the three matrices only
        result = impl(x, W["W_query"], W["W_key"], W["W_value"])
    else:
        result = impl(x)
    if isinstance(result, Mapping):
        return {str(k): to_numpy(v) for k, v in result.items()}
    return {"context_vec": to_numpy(result)}


def compare(
    reference: Implementation,
    candidate: Implementation,
    x: Any,
    *,
    weights: Mapping[str, Any] | None = None,
    atol: float | None = None,
    rtol: float = FORWARD_RTOL,
) -> Comparison:
    """Run two implementations on ``x`` and compare them stage by stage.

    Each is an npattn Module (traced), a Trace, or a function: ``f(x)``, or, when ``weights`` is
    given, ``f(x, W_query, W_key, W_value)``, returning the output or a mapping of stage name ->
    array (use npattn's names: queries, keys, values, attn_scores, attn_weights, context_vec).
    A stage diverges when, in some column j (its last axis), max|ref - cand| > atol + rtol *
    max|ref[..., j]| (max over the finite entries; atol unset: 0, so each column is judged relative
    to its own magnitude: a wrong column of small values diverges), or when the shapes differ.

    Raises:
        ConfigError: atol or rtol negative or not finite, or so wide for a stage that a stage off
            by 0.1% would pass there; an implementation that is not a Module, Trace or function;
            ``weights`` with nonzero biases.
    """
    atol, rtol = check_tolerances(atol, rtol, "compare")
    ref = _stages_of(reference, x, weights)
    cand = _stages_of(candidate, x, weights)
    diffs = []
    for name in [*ref, *(k for k in cand if k not in ref)]:
        a, b = ref.get(name), cand.get(name)
        sa = None if a is None else a.shape
        sb = None if b is None else b.shape
        max_diff: float | None = None
        allowed = atol or 0.0
        if a is not None and b is not None:
            # max|ref| over the finite entries: masked -inf entries must not make every difference allowed
            allowed = allowed_error(a, atol, rtol, f"compare, stage {name}")
            if sa == sb:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                with np.errstate(invalid="ignore"):  # -inf - -inf at masked entries: equal, not NaN
                    diff = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
                diff = np.where(np.isnan(diff), np.inf, diff)
                max_diff = float(np.max(diff)) if diff.size else 0.0
                if diff.ndim and diff.size:  # each column against its own values: a wrong small column diverges
                    per_column = np.max(diff.reshape(-1, diff.shape[-1]), axis=0)
                    column = np.broadcast_to(column_allowed(a64, atol, rtol), per_column.shape)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        worst = int(np.argmax(np.where(per_column > column, per_column / column, -1.0)))
                    if per_column[worst] > column[worst]:
                        max_diff, allowed = float(per_column[worst]), float(column[worst])
        diffs.append(StageDiff(name, sa, sb, max_diff, allowed))
    return Comparison(diffs)


