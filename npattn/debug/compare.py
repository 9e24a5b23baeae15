"""compare(reference, candidate, x): two implementations stage by stage, the largest difference per
stage and the first stage whose values diverge, with a hint of what that usually means."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from npattn import _html
from npattn._checks import accepts_positional, from_tensor
from npattn.debug.formulas import format_shape, format_table, formula_of
from npattn.debug.tolerance import FORWARD_RTOL, allowed_error, check_tolerances, column_allowed, forward_rtol
from npattn.debug.trace import Trace, trace
from npattn.debug.weights import all_float64, refuse_biases, to_numpy, weights_of
from npattn.errors import ConfigError
from npattn.nn.module import Module
from npattn.nn.passes import kept_forward

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
    "x": "the inputs the two recorded differ: they were given different x, or one holds a narrower dtype "
    "(float16) and rounded x to it; compare modules of one dtype",
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
    "output": "the recorded stages agree but what forward returns does not: forward changes its result after "
    "its last recorded stage (an extra scaling, addition or reshape), or returns another array",
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
        if name == OUTPUT:  # what forward returned: not a stage of the formulas
            return _AFTER_DIVERGENCE[OUTPUT]
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


OUTPUT = "output"
"""The row of what each implementation returned, compared after the stages when it is not simply
the last recorded stage on both sides (a forward that changes its result after its last stage)."""


def _numeric(value: Any) -> np.ndarray | None:
    """``value`` as a numeric ndarray, or None when it is not one (a tuple, None, objects)."""
    try:
        array = to_numpy(value)
    except Exception:
        return None
    return array if array.dtype.kind in "biuf" else None


def _stages_of(
    impl: Implementation, x: Any, weights: Mapping[str, Any] | None
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """(name -> array, the returned output or None) for a Module (traced), a Trace, or a function
    returning an array (its context_vec and its output) or a mapping (its ``output`` entry, if any)."""
    if isinstance(impl, Module):
        with kept_forward(impl):  # a check: the module's last forward (what its backward differentiates) is kept
            impl = trace(impl, x)
    if isinstance(impl, Trace):
        found: dict[str, np.ndarray] = {}
        for stage in impl.stages:
            found.setdefault(stage.qualname, stage.array)
        output = _numeric(impl.output)
        if "context_vec" not in found and output is not None:
            found["context_vec"] = output
        return found, output
    if not callable(impl):
        raise ConfigError(f"compare expects a Module, a Trace or a function, got {type(impl).__name__}")
    if any(cls.__module__.split(".")[0] == "torch" for cls in type(impl).__mro__):  # it would get ndarrays
        raise ConfigError(
            f"compare runs npattn Modules, Traces and NumPy functions, got a PyTorch {type(impl).__name__}; "
            "check a PyTorch attention class with `npattn check FILE.py:CLASS` (npattn.check_attention)"
        )
    if weights is not None:
        W = weights_of(weights)
        refuse_biases(W)  # the function is handed the three matrices only
        _require_arguments(impl, with_weights=True)
        result = impl(x, W["W_query"], W["W_key"], W["W_value"])
    else:
        _require_arguments(impl, with_weights=False)
        result = impl(x)
    if isinstance(result, Mapping):
        found = {str(k): to_numpy(v) for k, v in result.items()}
        return found, found.get(OUTPUT)
    output = to_numpy(result)
    return {"context_vec": output}, output


def _require_arguments(func: Callable[..., Any], *, with_weights: bool) -> None:
    """Refuse, before calling it, a function whose signature does not take what compare passes it:
    ``f(x)`` without ``weights=``, ``f(x, W_query, W_key, W_value)`` with it. A TypeError the function
    raises itself, once called, is its own error and is not caught here."""
    n_args, other = (4, 1) if with_weights else (1, 4)
    if accepts_positional(func, n_args) is not False:
        return
    name = getattr(func, "__name__", type(func).__name__)
    signature = f"{name}{inspect.signature(func)}"
    if with_weights:
        expected = "compare(..., weights=...) calls a function as f(x, W_query, W_key, W_value)"
        fix = ": drop weights= for a function of x alone" if accepts_positional(func, other) else ""
    else:
        expected = "compare(..., x) without weights= calls a function as f(x)"
        fix = (
            ": a function that takes the weights needs weights= (a module, a mapping or a state_dict)"
            if accepts_positional(func, other)
            else ""
        )
    raise ConfigError(f"{expected}, got {signature}{fix}")


def _is_last_stage(found: Mapping[str, np.ndarray], output: np.ndarray) -> bool:
    """Whether ``output`` is the last recorded stage, value for value (then its row would repeat it)."""
    last = list(found.values())[-1] if found else None
    return last is not None and last.shape == output.shape and bool(np.array_equal(last, output, equal_nan=True))


def _with_output(
    ref: tuple[dict[str, np.ndarray], np.ndarray | None], cand: tuple[dict[str, np.ndarray], np.ndarray | None]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Both sides' stages, with an ``output`` row unless each side's output is its own last stage."""
    (ref_stages, ref_out), (cand_stages, cand_out) = ref, cand
    repeats = all(out is None or _is_last_stage(stages, out) for stages, out in (ref, cand))
    if not repeats:
        for stages, out in ((ref_stages, ref_out), (cand_stages, cand_out)):
            if out is not None:
                stages.setdefault(OUTPUT, out)
    return ref_stages, cand_stages


def _same_but_unit_axes(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Shapes that differ only by axes of length 1 (a single head's axis): the same values."""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def _float64_inputs(x: Any, weights: Mapping[str, Any] | None, implementations: tuple[Any, Any]) -> bool:
    """Whether both sides compute from float64 x and weights, so that their float64 stages are
    judged to float64's precision: the weights given, or npattn Modules whose parameters are all
    float64, whatever x's dtype (a float64 module converts x to float64, exactly: the book's float32
    inputs too). A function's own weights, or a Trace's, are unknown: float32's tolerance stays."""
    if weights is not None:
        return all_float64(x, weights)
    if not all(isinstance(impl, Module) for impl in implementations):
        return False
    params = [list(impl.parameters()) for impl in implementations]
    if not all(params):  # a module without parameters computes in what it is given (as before: x decides)
        return all_float64(x, {})
    return all(p.dtype == np.float64 for ps in params for p in ps)


def _refuse_non_finite(x: Any) -> None:
    """Two implementations given NaN or inf compare as NaN at every stage, which reads as a
    divergence that is not there."""
    try:
        arr = np.asarray(from_tensor(x, "x"))
    except (TypeError, ValueError):
        return  # not an array: the implementations say what they make of it
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        raise ConfigError(
            f"x holds NaN or inf ({bad} of {arr.size} entries non-finite): expected finite numbers "
            "(nothing can be compared on a non-finite input: every stage would differ by NaN)"
        )


def compare(
    reference: Implementation,
    candidate: Implementation,
    x: Any,
    *,
    weights: Mapping[str, Any] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
) -> Comparison:
    """Run two implementations on ``x`` and compare them stage by stage.

    Each is an npattn Module (traced), a Trace, or a function: ``f(x)``, or, when ``weights`` is
    given, ``f(x, W_query, W_key, W_value)``, returning the output or a mapping of stage name ->
    array (use npattn's names: queries, keys, values, attn_scores, attn_weights, context_vec).
    A stage diverges when, in some column j (its last axis), max|ref - cand| > atol + rtol *
    max|ref[..., j]| (max over the finite entries; atol unset: 0, so each column is judged relative
    to its own magnitude: a wrong column of small values diverges), or when the shapes differ.
    What each returns is compared too, as a last ``output`` row, unless on both sides it is simply
    the last recorded stage (a forward that changes its result after its last stage diverges there).

    Raises:
        ConfigError: atol or rtol negative or not finite, or so wide for a stage that a stage off
            by 0.1% would pass there; an implementation that is not a Module, Trace or function;
            ``weights`` with nonzero biases; x holding NaN or inf; a function whose signature does
            not take what it is called with (``f(x, W_query, W_key, W_value)`` without
            ``weights=``: it needs them).
    """
    atol, given = check_tolerances(atol, FORWARD_RTOL if rtol is None else rtol, "compare")
    _refuse_non_finite(x)
    ref, cand = _with_output(_stages_of(reference, x, weights), _stages_of(candidate, x, weights))
    inputs_float64 = _float64_inputs(x, weights, (reference, candidate))
    diffs = []
    for name in [*ref, *(k for k in cand if k not in ref)]:
        a, b = ref.get(name), cand.get(name)
        sa = None if a is None else a.shape
        sb = None if b is None else b.shape
        max_diff: float | None = None
        allowed = atol or 0.0
        if a is not None and b is not None:
            stage_rtol = forward_rtol(None if rtol is None else given, atol, inputs_float64, a, b)  # unset: by dtype
            # max|ref| over the finite entries: masked -inf entries must not make every difference allowed
            allowed = allowed_error(a, atol, stage_rtol, f"compare, stage {name}")
            if a.shape != b.shape and _same_but_unit_axes(a.shape, b.shape):  # (b, 6, 6), (b, 1, 6, 6): one head
                b = b.reshape(a.shape)
            if a.shape == b.shape:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                with np.errstate(invalid="ignore"):  # -inf - -inf at masked entries: equal, not NaN
                    diff = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
                diff = np.where(np.isnan(diff), np.inf, diff)
                max_diff = float(np.max(diff)) if diff.size else 0.0
                if diff.ndim and diff.size:  # each column against its own values: a wrong small column diverges
                    per_column = np.max(diff.reshape(-1, diff.shape[-1]), axis=0)
                    column = np.broadcast_to(column_allowed(a64, atol, stage_rtol), per_column.shape)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        worst = int(np.argmax(np.where(per_column > column, per_column / column, -1.0)))
                    if per_column[worst] > column[worst]:
                        max_diff, allowed = float(per_column[worst]), float(column[worst])
        diffs.append(StageDiff(name, sa, sb, max_diff, allowed))
    return Comparison(diffs)


