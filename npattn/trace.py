"""The seed article's debugging habit as tools: predict the shapes, trace every stage, compare.

    predict_shapes(n_tokens, d_in, d_out)   the expected shape of every stage, before running anything
    trace(module, x)                        run a forward pass and record every stage (name, formula,
                                            input shapes, output shape, the array)
    check_shapes(prediction, actual)        compare a trace (or just an output) with the prediction and
                                            say, on a mismatch, where the seed says to look
    check_rows(x, weights, output)          the single-token check: every token's context vector
                                            computed on its own (the book's section 3.4), row by row
    compare(reference, candidate, x)        two implementations stage by stage: the max difference per
                                            stage and the first stage whose values diverge

An implementation's weights are given as a mapping ``{"W_query", "W_key", "W_value"}`` of
(d_in, d_out) arrays (``weights_of`` extracts them from a module or any object holding them).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from npattn import functional as F
from npattn._checks import as_array, check_positive_int
from npattn.attention import SelfAttention_v1
from npattn.book import BOOK_TOKENS, book_inputs
from npattn.errors import ConfigError, ShapeError
from npattn.module import Module

__all__ = [
    "STAGE_FORMULAS",
    "Comparison",
    "RowCheck",
    "ShapeCheck",
    "ShapePrediction",
    "Stage",
    "StageDiff",
    "StagePrediction",
    "Trace",
    "check_rows",
    "check_shapes",
    "check_weights",
    "compare",
    "predict_shapes",
    "run_trace",
    "to_numpy",
    "trace",
    "weights_of",
]

WEIGHT_NAMES = ("W_query", "W_key", "W_value")

# stage name -> (formula, names of the stages (or weights) it reads). Unknown stages get a blank formula.
STAGE_FORMULAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "x": ("the input embeddings", ()),
    "queries": ("x @ W_query", ("x", "W_query")),
    "keys": ("x @ W_key", ("x", "W_key")),
    "values": ("x @ W_value", ("x", "W_value")),
    "attn_scores": ("queries @ keys^T", ("queries", "keys")),
    "masked_scores": ("attn_scores.masked_fill(mask, -inf)", ("attn_scores",)),
    "attn_weights": ("softmax(attn_scores / sqrt(d_k)) over keys", ("attn_scores",)),
    "dropped_weights": ("dropout(attn_weights)", ("attn_weights",)),
    "context_vec": ("attn_weights @ values", ("attn_weights", "values")),
}
# A stage that reads one of these reads the latest stage of the group (masked scores, dropped weights).
_LATEST_OF = {"attn_scores": ("attn_scores", "masked_scores"), "attn_weights": ("attn_weights", "dropped_weights")}


def _shape_str(shape: tuple[int, ...] | None) -> str:
    return "-" if shape is None else "(" + ", ".join(map(str, shape)) + ")"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, a rule under the header."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return lines


# ----------------------------------------------------------------------------------------------
# Shape prediction


@dataclass(frozen=True)
class StagePrediction:
    """One stage's expected shape and what changed relative to the stage it reads."""

    name: str
    formula: str
    shape: tuple[int, ...]
    change: str


@dataclass(frozen=True)
class ShapePrediction:
    """Expected shapes of every stage; ``prediction["attn_weights"]`` gives a shape; prints as a table."""

    n_tokens: int
    d_in: int
    d_out: int
    batch: int | None
    stages: tuple[StagePrediction, ...]

    def __getitem__(self, name: str) -> tuple[int, ...]:
        for stage in self.stages:
            if stage.name == name:
                return stage.shape
        raise KeyError(f"no predicted stage named {name!r}; stages: {', '.join(s.name for s in self.stages)}")

    def __contains__(self, name: object) -> bool:
        return any(stage.name == name for stage in self.stages)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self["context_vec"]

    def __str__(self) -> str:
        rows = [[s.name, s.formula, _shape_str(s.shape), s.change] for s in self.stages]
        head = f"predicted shapes: n_tokens={self.n_tokens}, d_in={self.d_in}, d_out={self.d_out}"
        head += f", batch={self.batch}" if self.batch is not None else ""
        return "\n".join([head, *_table(["stage", "formula", "shape", "what changed"], rows)])

    __repr__ = __str__


def predict_shapes(n_tokens: int, d_in: int, d_out: int, batch: int | None = None) -> ShapePrediction:
    """The shape of every stage of single-head self-attention, predicted before running anything.

    x (n, d_in) -> queries, keys, values (n, d_out) -> attn_scores, attn_weights (n, n)
    -> context_vec (n, d_out); a batch adds a leading dimension.

    Raises:
        ConfigError: a size that is not a positive integer.
    """
    n = check_positive_int(n_tokens, "n_tokens")
    d_in = check_positive_int(d_in, "d_in")
    d_out = check_positive_int(d_out, "d_out")
    lead: tuple[int, ...] = () if batch is None else (check_positive_int(batch, "batch"),)
    changes = {
        "x": "one row per token" + (", one matrix per batch entry" if lead else ""),
        "queries": f"columns: d_in={d_in} -> d_out={d_out}",
        "keys": f"columns: d_in={d_in} -> d_out={d_out}",
        "values": f"columns: d_in={d_in} -> d_out={d_out}",
        "attn_scores": f"one score per (query, key) pair: (n, d_out) -> (n, n={n})",
        "attn_weights": "same shape; each row now sums to 1",
        "context_vec": f"back to d_out={d_out} columns, one row per token",
    }
    shapes = {
        "x": (*lead, n, d_in),
        "queries": (*lead, n, d_out),
        "keys": (*lead, n, d_out),
        "values": (*lead, n, d_out),
        "attn_scores": (*lead, n, n),
        "attn_weights": (*lead, n, n),
        "context_vec": (*lead, n, d_out),
    }
    stages = tuple(StagePrediction(name, STAGE_FORMULAS[name][0], shapes[name], changes[name]) for name in shapes)
    return ShapePrediction(n, d_in, d_out, None if not lead else lead[0], stages)


# ----------------------------------------------------------------------------------------------
# Tracing


@dataclass
class Stage:
    """One recorded stage: ``module`` is the dotted sub-module name ("" for the traced module)."""

    name: str
    module: str
    formula: str
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    array: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def qualname(self) -> str:
        """``heads.0.queries`` for a sub-module's stage, ``queries`` for the traced module's own."""
        return f"{self.module}.{self.name}" if self.module else self.name


@dataclass
class Trace:
    """Every stage of one forward pass, in the order they ran, and the output.

    ``trace["attn_weights"]`` is the array of the first stage with that name (or that qualified
    name, e.g. ``"heads.1.attn_weights"``); ``trace.shapes`` maps qualified names to shapes.
    """

    stages: list[Stage]
    output: Any
    module_name: str = ""

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def stage(self, name: str) -> Stage:
        """The first stage whose qualified name or plain name is ``name``; KeyError otherwise."""
        for stage in self.stages:
            if stage.qualname == name:
                return stage
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage named {name!r}; recorded: {', '.join(s.qualname for s in self.stages)}")

    def __getitem__(self, name: str) -> np.ndarray:
        return self.stage(name).array

    def __contains__(self, name: object) -> bool:
        return any(name in (s.qualname, s.name) for s in self.stages)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {s.qualname: s.shape for s in self.stages}

    def __str__(self) -> str:
        rows = []
        for s in self.stages:
            inputs = ", ".join(f"{name} {_shape_str(shape)}" for name, shape in s.input_shapes)
            rows.append([s.qualname, s.formula, inputs, _shape_str(s.shape)])
        head = f"trace of {self.module_name}" if self.module_name else "trace"
        return "\n".join([head, *_table(["stage", "formula", "inputs", "shape"], rows)])

    __repr__ = __str__


def _weight_shape(module: Module, name: str) -> tuple[int, ...] | None:
    """Shape of ``module.<name>`` as the (d_in, d_out) matrix the formula multiplies by, if it exists."""
    try:
        return weights_of(module, names=(name,))[name].shape
    except ConfigError:
        return None


def _input_shapes(module: Module, stages: list[Stage], name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The shapes of what stage ``name`` reads: earlier stages of the same module, or its weights."""
    if name in STAGE_FORMULAS:
        wanted = STAGE_FORMULAS[name][1]
    else:
        wanted = (stages[-1].name,) if stages else ()
    found: list[tuple[str, tuple[int, ...]]] = []
    for want in wanted:
        candidates = _LATEST_OF.get(want, (want,))
        earlier = [s for s in stages if s.name in candidates]
        if earlier:
            found.append((earlier[-1].name, earlier[-1].shape))
        elif want.startswith("W_"):
            shape = _weight_shape(module, want)
            if shape is not None:
                found.append((want, shape))
    return tuple(found)


def trace(module: Module, x: Any, *args: Any, **kwargs: Any) -> Trace:
    """Run ``module(x, *args, **kwargs)`` recording every stage of it and of its sub-modules.

    Installs a recorder on every module of ``module.modules()``, runs forward, and restores the
    previous recorders even when forward raises. Stage names are whatever the forward passes
    record; the known ones ("x", "queries", ..., "context_vec") get their formula.

    Raises:
        ConfigError: ``module`` is not an npattn Module.
        Whatever the forward raises (after restoring the recorders).
    """
    if not isinstance(module, Module):
        raise ConfigError(f"trace expects an npattn.Module, got {type(module).__name__}")
    stages: list[Stage] = []
    per_module: dict[str, list[Stage]] = {}
    saved = [(m, m._recorder) for m in module.modules()]

    def recorder_for(sub: Module, prefix: str) -> Callable[[str, np.ndarray], None]:
        def record(name: str, array: np.ndarray) -> None:
            own = per_module.setdefault(prefix, [])
            formula = STAGE_FORMULAS.get(name, ("", ()))[0]
            stage = Stage(name, prefix, formula, _input_shapes(sub, own, name), np.array(array, copy=True))
            own.append(stage)
            stages.append(stage)

        return record

    try:
        for prefix, sub in module.named_modules():
            object.__setattr__(sub, "_recorder", recorder_for(sub, prefix))
        output = module(x, *args, **kwargs)
    finally:
        for sub, previous in saved:
            object.__setattr__(sub, "_recorder", previous)
    return Trace(stages, output, type(module).__name__)


# ----------------------------------------------------------------------------------------------
# Shape check: trace (or output) against the prediction, with the seed's advice


@dataclass(frozen=True)
class ShapeRow:
    name: str
    expected: tuple[int, ...]
    actual: tuple[int, ...] | None

    @property
    def ok(self) -> bool:
        return self.actual == self.expected


@dataclass
class ShapeCheck:
    """Predicted vs actual shape per stage; truthy when all match; ``advice`` says where to look."""

    rows: list[ShapeRow]
    advice: list[str]

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.rows if r.actual is not None) and any(r.actual is not None for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def first_mismatch(self) -> str | None:
        return next((r.name for r in self.rows if r.actual is not None and not r.ok), None)

    def __str__(self) -> str:
        rows = [
            [r.name, _shape_str(r.expected), _shape_str(r.actual), "ok" if r.ok else "MISMATCH"]
            for r in self.rows
            if r.actual is not None
        ]
        lines = _table(["stage", "predicted", "actual", ""], rows)
        compared = len(rows)
        if compared < len(self.rows):
            unseen = [r.name for r in self.rows if r.actual is None]
            lines.append(f"(not recorded, so not compared: {', '.join(unseen)})")
        if self.passed:
            what = f"all {compared} recorded stages match" if compared > 1 else f"{rows[0][0]} matches"
            lines.append(f"shape check: {what} the prediction")
        else:
            lines.append("shape check: FAILED")
            lines += [f"  - {a}" for a in self.advice]
        return "\n".join(lines)

    __repr__ = __str__


def _output_advice(expected: tuple[int, ...], actual: tuple[int, ...], d_in: int, d_out: int) -> list[str]:
    """The seed's reading of a wrong output shape (rows = tokens, columns = d_out)."""
    if len(actual) != len(expected):
        return [
            f"the output has {len(actual)} dimensions, expected {len(expected)} {_shape_str(expected)}: "
            "a batch dimension was added or lost"
        ]
    advice = []
    rows_ok = actual[:-1] == expected[:-1]
    if not rows_ok:
        advice.append(
            f"the output has {actual[-2]} rows where there are {expected[-2]} tokens: the context stage must keep "
            "one row per token (attn_weights (n, n) @ values (n, d_out)); check which side the weights multiply"
        )
    if actual[-1] != expected[-1]:
        if actual[-1] == d_in and d_in != d_out:
            advice.append(
                f"the output has d_in={d_in} columns where d_out={d_out} was expected: "
                "a projection used d_in where d_out was expected (W_query/W_key/W_value must be (d_in, d_out))"
            )
        elif rows_ok:
            advice.append(
                f"right rows but {actual[-1]} columns instead of d_out={d_out}: look at the context stage first "
                "(context_vec = attn_weights @ values has the values' columns)"
            )
        else:
            advice.append(f"the output has {actual[-1]} columns, expected d_out={d_out}")
    return advice


def _stage_advice(name: str, expected: tuple[int, ...], actual: tuple[int, ...], d_in: int, d_out: int) -> str:
    if name in ("queries", "keys", "values") and actual[-1:] == (d_in,) and d_in != d_out:
        return f"{name} has d_in={d_in} columns: a projection used d_in where d_out={d_out} was expected"
    if name == "attn_scores":
        return f"attn_scores should be (n, n): one score per (query, key) pair, queries @ keys^T, got {actual}"
    if name == "attn_weights":
        return "attn_weights should keep the scores' (n, n) shape: the softmax changes values, not the shape"
    return f"{name} is the first stage with a wrong shape: expected {_shape_str(expected)}, got {_shape_str(actual)}"


def check_shapes(prediction: ShapePrediction, actual: Trace | Mapping[str, Any] | Any) -> ShapeCheck:
    """Compare actual shapes with ``prediction``.

    ``actual`` is a Trace, a mapping of stage name -> array or shape, or a bare output (the
    context vectors only, all a user's function may give). Only stages present are compared.
    On a mismatch, ``advice`` names the first wrong stage and, for the output, what the seed says:
    d_in columns -> a projection used d_in where d_out was expected; right rows but wrong
    columns -> look at the context stage first.
    """
    if isinstance(actual, Trace):
        found: dict[str, tuple[int, ...]] = {}
        for stage in actual.stages:
            found.setdefault(stage.name, stage.shape)
        if "context_vec" not in found and actual.output is not None:
            found["context_vec"] = np.shape(to_numpy(actual.output))
    elif isinstance(actual, Mapping):
        found = {
            k: tuple(v) if isinstance(v, tuple) else np.shape(to_numpy(v)) for k, v in actual.items() if k in prediction
        }
    else:
        found = {"context_vec": np.shape(to_numpy(actual))}
    rows = [ShapeRow(s.name, s.shape, found.get(s.name)) for s in prediction.stages]
    advice: list[str] = []
    d_in, d_out = prediction.d_in, prediction.d_out
    first_bad = next((r for r in rows if r.actual is not None and not r.ok and r.name != "context_vec"), None)
    if first_bad is not None and first_bad.actual is not None:
        advice.append(_stage_advice(first_bad.name, first_bad.expected, first_bad.actual, d_in, d_out))
    out_row = rows[-1]
    if out_row.actual is not None and not out_row.ok:
        advice += _output_advice(out_row.expected, out_row.actual, d_in, d_out)
    if not any(r.actual is not None for r in rows):
        advice.append("no stage of the prediction was recorded")
    return ShapeCheck(rows, advice)


# ----------------------------------------------------------------------------------------------
# Weights and outputs of arbitrary implementations


def to_numpy(value: Any) -> np.ndarray:
    """An ndarray from an ndarray, an npattn Parameter, a torch tensor (detached) or nested lists."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def weights_of(obj: Any, names: Sequence[str] = WEIGHT_NAMES) -> dict[str, np.ndarray]:
    """The (d_in, d_out) weight matrices of a module, an object, or a mapping (a state dict).

    Accepts for each name: an array or Parameter (used as it is, (d_in, d_out)), or a Linear-like
    layer with ``.weight`` (out_features, in_features), whose transpose is used. In a mapping,
    ``"W_query.weight"`` keys (a state dict of Linear layers) are transposed the same way.

    Raises:
        ConfigError: a weight is missing (the message lists what was found).
    """
    out: dict[str, np.ndarray] = {}
    missing = []
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                out[name] = as_array(to_numpy(obj[name]), name)
            elif f"{name}.weight" in obj:
                out[name] = as_array(to_numpy(obj[f"{name}.weight"]), name).T
            else:
                missing.append(name)
            continue
        attr = getattr(obj, name, None)
        if attr is None:
            missing.append(name)
        elif hasattr(attr, "weight") and not isinstance(attr, np.ndarray):
            out[name] = as_array(to_numpy(attr.weight), f"{name}.weight").T
        else:
            out[name] = as_array(to_numpy(attr), name)
    if missing:
        have = sorted(map(str, obj)) if isinstance(obj, Mapping) else [a for a in dir(obj) if a.startswith("W_")]
        raise ConfigError(
            f"{type(obj).__name__} has no {', '.join(missing)} (expected {', '.join(names)}; found: "
            f"{', '.join(have) or 'nothing of the kind'})"
        )
    return out


def check_weights(x: Any, weights: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate x (..., n, d_in) and the three (d_in, d_out) weights; returns float64 copies.

    Raises:
        ConfigError: a weight missing. ShapeError: shapes that do not fit together.
    """
    W = weights_of(weights)
    x64 = np.asarray(as_array(to_numpy(x), "x"), dtype=np.float64)
    if x64.ndim < 2:
        raise ShapeError(f"x: expected shape (n, d_in) or (batch, n, d_in), got {x64.shape}")
    d_in = x64.shape[-1]
    d_out = W["W_query"].shape[-1] if W["W_query"].ndim == 2 else None
    for name, w in W.items():
        if w.ndim != 2 or w.shape != (d_in, d_out):
            raise ShapeError(
                f"{name}: expected shape (d_in={d_in}, d_out) with the same d_out for all three weights "
                f"(W_query is {W['W_query'].shape}), got {w.shape}"
            )
    return (x64, *(np.asarray(W[n], dtype=np.float64) for n in WEIGHT_NAMES))  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------
# The single-token check (the book's section 3.4, one query at a time)


@dataclass
class RowCheck:
    """Each token's context vector computed on its own vs the batched output's row."""

    expected: np.ndarray
    output: np.ndarray
    row_diffs: np.ndarray
    atol: float
    tokens: Sequence[str] | None = None

    @property
    def worst_row(self) -> tuple[int, ...]:
        """Index of the worst row: (row,) or (batch, row)."""
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(self.row_diffs)), self.row_diffs.shape))

    @property
    def max_diff(self) -> float:
        return float(np.max(self.row_diffs)) if self.row_diffs.size else 0.0

    @property
    def bad_rows(self) -> list[tuple[int, ...]]:
        return [tuple(int(i) for i in idx) for idx in np.argwhere(self.row_diffs > self.atol)]

    @property
    def passed(self) -> bool:
        return not np.any(self.row_diffs > self.atol)

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
        return (
            f"single-token check (each token's context vector computed on its own, section 3.4): {verdict}\n"
            f"  worst: {self._row_name(worst)}: on its own [{exp}], batched [{got}], "
            f"max |diff| {self.max_diff:.3e} (allowed {self.atol:.0e})"
        )

    __repr__ = __str__


def single_token_context(
    x: np.ndarray, W_query: np.ndarray, W_key: np.ndarray, W_value: np.ndarray, i: int, *, causal: bool = False
) -> np.ndarray:
    """The book's step-by-step computation for token i of x (n, d_in): context vector (d_out,)."""
    query_i = x[i] @ W_query  # (d_out,)
    keys = x @ W_key  # (n, d_out)
    values = x @ W_value  # (n, d_out)
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
    atol: float = 1e-5,
    tokens: Sequence[str] | None = None,
) -> RowCheck:
    """The seed's verification: every row of the batched ``output`` against the same token's
    context vector computed on its own (x (n, d_in) or (b, n, d_in); output like x with d_out
    columns). ``weights`` is a mapping or an object holding W_query/W_key/W_value.

    Raises:
        ShapeError: ``output`` does not have the shape (..., n, d_out) the weights give.
    """
    if not isinstance(weights, Mapping):
        weights = weights_of(weights)
    x64, Wq, Wk, Wv = check_weights(x, weights)
    out = np.asarray(as_array(to_numpy(output), "output"), dtype=np.float64)
    expected_shape = (*x64.shape[:-1], Wq.shape[1])
    if out.shape != expected_shape:
        raise ShapeError(f"output: expected shape {expected_shape} (one row of d_out per token), got {out.shape}")
    flat_x = x64.reshape(-1, *x64.shape[-2:])
    expected = np.stack(
        [
            np.stack([single_token_context(xb, Wq, Wk, Wv, i, causal=causal) for i in range(xb.shape[0])])
            if xb.shape[0]
            else np.zeros((0, Wq.shape[1]))
            for xb in flat_x
        ]
    ).reshape(expected_shape)
    row_diffs = np.max(np.abs(expected - out), axis=-1, initial=0.0)
    return RowCheck(expected, out, row_diffs, atol, tokens)


# ----------------------------------------------------------------------------------------------
# compare: two implementations, stage by stage


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
        # x is the same for both by construction; the weights are not stages
        reads = [r for r in STAGE_FORMULAS.get(name, ("", ()))[1] if r != "x" and not r.startswith("W_")]
        unchecked = [r for r in reads if not any(s.name == r and s.compared for s in self.stages)]
        if unchecked:
            return (
                f"the stages it reads ({', '.join(unchecked)}) were not compared, so the mistake is at "
                f"{name} or before it: record them too to narrow it down"
            )
        return _AFTER_DIVERGENCE.get(name, "look at this stage")

    def __str__(self) -> str:
        first = self.first_divergence
        rows = []
        for s in self.stages:
            if not s.compared:
                diff, verdict = "-", "only in " + ("reference" if s.reference_shape is not None else "candidate")
            elif s.max_diff is None:
                diff = "-"
                verdict = f"SHAPE {_shape_str(s.reference_shape)} vs {_shape_str(s.candidate_shape)}"
            else:
                diff, verdict = f"{s.max_diff:.3e}", "ok" if not s.diverged else "DIVERGES"
            if s.name == first:
                verdict += "  <- first divergence"
            shape = _shape_str(s.reference_shape if s.reference_shape is not None else s.candidate_shape)
            rows.append([s.name, shape, diff, verdict])
        lines = _table(["stage", "shape", "max |diff|", ""], rows)
        if first is None:
            lines.append("all compared stages agree" if self.passed else "no stage in common to compare")
        else:
            lines.append(f"first diverging stage: {first}: {self._hint(first)}")
        return "\n".join(lines)

    __repr__ = __str__


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
    atol: float = 1e-5,
    rtol: float = 1e-5,
) -> Comparison:
    """Run two implementations on ``x`` and compare them stage by stage.

    Each is an npattn Module (traced), a Trace, or a function: ``f(x)``, or, when ``weights`` is
    given, ``f(x, W_query, W_key, W_value)``, returning the output or a mapping of stage name ->
    array (use npattn's names: queries, keys, values, attn_scores, attn_weights, context_vec).
    A stage diverges when max|ref - cand| > atol + rtol * max|ref|, or when the shapes differ.
    """
    ref = _stages_of(reference, x, weights)
    cand = _stages_of(candidate, x, weights)
    diffs = []
    for name in [*ref, *(k for k in cand if k not in ref)]:
        a, b = ref.get(name), cand.get(name)
        sa = None if a is None else a.shape
        sb = None if b is None else b.shape
        max_diff: float | None = None
        allowed = atol
        if a is not None and b is not None:
            allowed = atol + rtol * (float(np.max(np.abs(a))) if a.size else 0.0)
            if sa == sb:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                with np.errstate(invalid="ignore"):  # -inf - -inf at masked entries: equal, not NaN
                    diff = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
                max_diff = float(np.max(np.where(np.isnan(diff), np.inf, diff))) if diff.size else 0.0
        diffs.append(StageDiff(name, sa, sb, max_diff, allowed))
    return Comparison(diffs)


# ----------------------------------------------------------------------------------------------
# npattn trace


def _format_rows(a: np.ndarray, tokens: Sequence[str] | None) -> str:
    a = np.atleast_2d(a)
    width = max((len(t) for t in tokens), default=0) + 1 if tokens else 0
    lines = []
    for i, row in enumerate(a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a):
        name = tokens[i].ljust(width) if tokens and a.ndim == 2 and i < len(tokens) else ""
        lines.append("  " + name + "[" + ", ".join(f"{v: .4f}" for v in row) + "]")
    return "\n".join(lines)


def run_trace(
    n_tokens: int = 6,
    d_in: int = 3,
    d_out: int = 2,
    *,
    seed: int = 123,
    book: bool = False,
    values: bool = False,
    out: TextIO | None = None,
) -> int:
    """``npattn trace``: the prediction, the trace of SelfAttention_v1, the shape check and the
    single-token check, printed to ``out`` (stdout). With ``book`` the book's input and seed-123
    weights (6 tokens, d_in=3, d_out=2). Returns 0 when both checks pass, else 1.

    Raises:
        ConfigError: a size that is not a positive integer.
    """
    out = out if out is not None else sys.stdout
    tokens: Sequence[str] | None = None
    if book:
        x, model, tokens = book_inputs(), SelfAttention_v1(3, 2, rng=123), BOOK_TOKENS
        print('the book\'s example: "Your journey starts with one step", weights of torch.manual_seed(123)\n', file=out)
    else:
        n = check_positive_int(n_tokens, "n_tokens")
        model = SelfAttention_v1(d_in, d_out, rng=seed)
        x = np.random.default_rng(seed).random((n, model.d_in)).astype(np.float32)
        print(f"SelfAttention_v1({d_in}, {d_out}, rng={seed}) on {n_tokens} random tokens\n", file=out)
    prediction = predict_shapes(x.shape[0], model.d_in, model.d_out)
    print("1. predict the shapes before running anything", file=out)
    print(prediction, file=out)
    recorded = trace(model, x)
    print("\n2. run it and record every stage", file=out)
    print(recorded, file=out)
    shape_check = check_shapes(prediction, recorded)
    print("\n3. compare the trace with the prediction", file=out)
    print(shape_check, file=out)
    row_check = check_rows(x, model, recorded.output, tokens=tokens)
    print("\n4. " + str(row_check), file=out)
    if book:
        alone = ", ".join(f"{v:.4f}" for v in row_check.expected[1])
        print(f"  row 2 (journey) computed on its own: [{alone}], the book's context_vec_2 of section 3.4", file=out)
    print("\ncontext_vec:", file=out)
    print(_format_rows(np.asarray(recorded.output), tokens), file=out)
    if values:
        for stage in recorded:
            print(f"\n{stage.qualname} {_shape_str(stage.shape)}:", file=out)
            print(_format_rows(stage.array, tokens if stage.shape[0] == len(tokens or ()) else None), file=out)
    return 0 if shape_check and row_check else 1
