"""Shape prediction before running anything, and the shape check of a trace against it.

    predict_shapes(n_tokens, d_in, d_out)   the expected shape of every stage (num_heads=, kind= for
                                            causal and multi-head attention; predict_shapes_for(module,
                                            x) reads them off a module)
    check_shapes(prediction, actual)        compare a trace (or just an output) with the prediction and
                                            say, on a mismatch, where the seed article says to look"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn import _html
from npattn._checks import check_nonnegative_int, check_positive_int
from npattn.debug.formulas import KINDS, format_shape, format_table, formula_of, kind_of
from npattn.debug.trace import Trace
from npattn.debug.weights import describe_value, to_numpy
from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.nn.attention import (
    MultiHeadAttentionWrapper,
)
from npattn.nn.layers import Dropout
from npattn.nn.module import Module

__all__ = [
    "ShapeCheck",
    "ShapePrediction",
    "ShapeRow",
    "StagePrediction",
    "check_shapes",
    "predict_shapes",
    "predict_shapes_for",
]


@dataclass(frozen=True)
class StagePrediction:
    """One stage's expected shape and what changed relative to the stage it reads."""

    name: str
    formula: str
    shape: tuple[int, ...]
    change: str

    def nbytes(self, dtype: Any = np.float32) -> int:
        """The stage's array in bytes for ``dtype``: every dimension multiplied, times the item size."""
        return math.prod(self.shape) * np.dtype(dtype).itemsize


def format_bytes(n: int) -> str:
    """1536 -> "1.5 KiB": bytes in powers of 1024, three significant digits."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class ShapePrediction:
    """Expected shapes of every stage; ``prediction["attn_weights"]`` gives a shape; prints as a table.

    The last stage is the output (``output_name``: context_vec, or out_proj for multi-head).
    """

    n_tokens: int
    d_in: int
    d_out: int
    batch: int | None
    stages: tuple[StagePrediction, ...]
    num_heads: int | None = None
    kind: str = "self"

    def __getitem__(self, name: str) -> tuple[int, ...]:
        for stage in self.stages:
            if stage.name == name:
                return stage.shape
        raise KeyError(f"no predicted stage named {name!r}; stages: {', '.join(s.name for s in self.stages)}")

    def __contains__(self, name: object) -> bool:
        return any(stage.name == name for stage in self.stages)

    @property
    def output_name(self) -> str:
        return self.stages[-1].name

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.stages[-1].shape

    @property
    def output_columns(self) -> str:
        """How many columns the output has, in words: "d_out=2", or "d_out * num_heads = 4"."""
        if self.kind == "wrapper":
            return f"d_out * num_heads = {self.output_shape[-1]}"
        return f"d_out={self.d_out}"

    def memory(self, dtype: Any = np.float32) -> dict[str, int]:
        """Bytes of every stage's array for ``dtype`` (float32: 4 per number, float64: 8)."""
        return {s.name: s.nbytes(dtype) for s in self.stages}

    def total_bytes(self, dtype: Any = np.float32) -> int:
        """All stages together: what a forward pass keeps when it records every stage."""
        return sum(self.memory(dtype).values())

    def _rows(self) -> list[list[str]]:
        return [
            [s.name, s.formula, format_shape(s.shape), format_bytes(s.nbytes(np.float32)),
             format_bytes(s.nbytes(np.float64)), s.change]
            for s in self.stages
        ]

    _HEADER = ("stage", "formula", "shape", "float32", "float64", "what changed")

    def _head(self) -> str:
        head = f"predicted shapes: n_tokens={self.n_tokens}, d_in={self.d_in}, d_out={self.d_out}"
        head += f", batch={self.batch}" if self.batch is not None else ""
        head += f", num_heads={self.num_heads}" if self.num_heads is not None else ""
        return head + (f" ({self.kind} attention)" if self.kind != "self" else "")

    def _total(self) -> str:
        return (
            f"all stages: {format_bytes(self.total_bytes(np.float32))} in float32, "
            f"{format_bytes(self.total_bytes(np.float64))} in float64"
        )

    def __str__(self) -> str:
        return "\n".join([self._head(), *format_table(self._HEADER, self._rows()), self._total()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return _html.wrap(_html.table(self._HEADER, self._rows(), caption=self._head()), text=self._total())


def predict_shapes(
    n_tokens: int,
    d_in: int,
    d_out: int,
    batch: int | None = None,
    *,
    num_heads: int | None = None,
    kind: str | None = None,
    dropout: bool = False,
) -> ShapePrediction:
    """The shape of every stage, predicted before running anything.

    ``kind``: "self" (SelfAttention_v1/v2, the default without ``num_heads``), "causal"
    (CausalAttention: adds masked_scores), "wrapper" (MultiHeadAttentionWrapper: every head's
    stages as ``heads.i.<stage>``, then the heads concatenated to d_out * num_heads columns) or
    "multihead" (MultiHeadAttention, the default with ``num_heads``: scores, weights and
    context vectors per head (batch, num_heads, n, ...), then merged_heads and out_proj).
    ``dropout``: the causal kinds also record dropped_weights (training mode with p > 0).

    Self-attention: x (n, d_in) -> queries, keys, values (n, d_out) -> attn_scores, attn_weights
    (n, n) -> context_vec (n, d_out); a batch adds a leading dimension.

    Raises:
        ConfigError: n_tokens not an integer >= 0 (0: an empty sequence, as the modules accept),
            another size not a positive integer; an unknown kind; num_heads missing for
            a multi-head kind, given for a single-head one, or not dividing d_out (multihead);
            dropout not a bool, or True for "self".
    """
    n = check_nonnegative_int(n_tokens, "n_tokens")  # 0 tokens: the modules accept an empty sequence too
    d_in = check_positive_int(d_in, "d_in")
    d_out = check_positive_int(d_out, "d_out")
    lead: tuple[int, ...] = () if batch is None else (check_positive_int(batch, "batch"),)
    kind = kind if kind is not None else ("self" if num_heads is None else "multihead")
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    multi = kind in ("wrapper", "multihead")
    if multi != (num_heads is not None):
        raise ConfigError(f"num_heads is {'required' if multi else 'not used'} for kind={kind!r}, got {num_heads!r}")
    if not isinstance(dropout, (bool, np.bool_)):  # "no" would read as True
        raise ConfigError(f"dropout: expected True or False, got {dropout!r} ({type(dropout).__name__})")
    if dropout and kind == "self":
        raise ConfigError("kind='self' (SelfAttention_v1/v2) has no dropout stage; use kind='causal'")
    h = check_positive_int(num_heads, "num_heads") if multi else 1
    if kind == "multihead" and d_out % h:
        raise ConfigError(f"d_out must be divisible by num_heads, got d_out={d_out} and num_heads={h}")
    head_dim = d_out // h if kind == "multihead" else d_out
    heads = (h,) if kind == "multihead" else ()  # multi-head attention makes the heads a batch axis
    causal = kind != "self"
    columns = f"columns: d_in={d_in} -> d_out={d_out}"
    single: list[tuple[str, tuple[int, ...], str]] = [
        ("x", (*lead, n, d_in), "one row per token" + (", one matrix per batch entry" if lead else "")),
        ("queries", (*lead, n, d_out), columns),
        ("keys", (*lead, n, d_out), columns),
        ("values", (*lead, n, d_out), columns),
    ]
    scores = f"one score per (query, key) pair: (n, d_out) -> (n, n={n})"
    if heads:
        scores = f"{h} heads of head_dim={head_dim}, each (n, n={n}): one score per (query, key) pair per head"
    single.append(("attn_scores", (*lead, *heads, n, n), scores))
    if causal:
        single.append(("masked_scores", (*lead, *heads, n, n), "same shape; entries above the diagonal are -inf"))
    single.append(("attn_weights", (*lead, *heads, n, n), "same shape; each row now sums to 1"))
    if dropout:
        single.append(("dropped_weights", (*lead, *heads, n, n), "same shape; dropped entries 0, kept ones / (1 - p)"))
    back = f"back to d_out={d_out} columns, one row per token"
    if heads:
        back = f"back to head_dim={head_dim} columns, one row per token, in every head"
    single.append(("context_vec", (*lead, *heads, n, head_dim), back))
    head_kind = "causal" if kind == "wrapper" else kind  # the wrapper's heads are CausalAttention
    stages = [StagePrediction(name, formula_of(name, head_kind)[0], shape, change) for name, shape, change in single]
    if kind == "multihead":
        merged = f"heads merged back: (batch, {h}, n, {head_dim}) -> (batch, n, d_out={d_out})"
        stages.append(StagePrediction("merged_heads", formula_of("merged_heads")[0], (*lead, n, d_out), merged))
        mixed = "same shape; the heads' columns mixed by a (d_out, d_out) Linear"
        stages.append(StagePrediction("out_proj", formula_of("out_proj")[0], (*lead, n, d_out), mixed))
    elif kind == "wrapper":
        stages = [
            StagePrediction(f"heads.{i}.{s.name}", s.formula, s.shape, s.change if i == 0 else "as heads.0")
            for i in range(h)
            for s in stages
        ]
        concat = f"{h} heads side by side: {h} x d_out={d_out} -> {h * d_out} columns"
        stages.append(StagePrediction("context_vec", formula_of("context_vec", kind)[0], (*lead, n, h * d_out), concat))
    return ShapePrediction(n, d_in, d_out, lead[0] if lead else None, tuple(stages), num_heads if multi else None, kind)


def _shape_of(value: Any, name: str, expected: str, *, shape_ok: bool = False) -> tuple[int, ...]:
    """The shape of ``value``: an array, a torch tensor or nested lists of numbers, or (``shape_ok``)
    a tuple of ints >= 0 read as the shape itself. ``expected``: the shape to name in the error.

    Raises:
        DTypeError: anything else (a str, None, an object), naming what was expected and given; it
            used to be read as a 0-d array and reported as a shape mismatch.
    """
    if shape_ok and isinstance(value, tuple):
        if all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in value):
            return tuple(int(d) for d in value)
        raise DTypeError(
            f"{name}: expected a shape (a tuple of ints >= 0) or an array of shape {expected}, got {value!r}"
        )
    try:
        kind = to_numpy(value).dtype.kind
    except Exception:  # ragged lists and the like: not an array
        kind = "O"
    if kind not in "biufc":
        also = " (or a tuple of ints, the shape)" if shape_ok else ""
        given = "None" if value is None else describe_value(value)
        given += f" ({value[:20]!r})" if isinstance(value, str) else ""
        raise DTypeError(f"{name}: expected an array of shape {expected}{also}, got {given}")
    return tuple(np.shape(to_numpy(value)))


def predict_shapes_for(module: Module, x: Any) -> ShapePrediction:
    """``predict_shapes`` with the sizes, kind, heads and dropout of one of npattn's attention
    classes, for an input x (an array, or just its shape (n, d_in) or (b, n, d_in)).

    Raises:
        ConfigError: ``module`` is not one of npattn's attention classes (use predict_shapes).
        ShapeError: x is not 2-D or 3-D. DTypeError: x neither an array nor a tuple of ints.
    """
    kind = kind_of(module)
    if kind is None:
        raise ConfigError(
            f"predict_shapes_for knows npattn's attention classes, got {type(module).__name__}: "
            "use predict_shapes(n_tokens, d_in, d_out, ...) with your sizes"
        )
    shape = _shape_of(x, "predict_shapes_for: x", "(n, d_in) or (batch, n, d_in)", shape_ok=True)
    if len(shape) not in (2, 3):
        raise ShapeError(f"x: expected shape (n, d_in) or (batch, n, d_in), got {shape}")
    head: Any = module.heads[0] if isinstance(module, MultiHeadAttentionWrapper) else module
    dropout = any(isinstance(m, Dropout) and m.training and m.p > 0 for m in module.modules())
    num_heads = getattr(module, "num_heads", None)
    batch = shape[0] if len(shape) == 3 else None
    return predict_shapes(shape[-2], head.d_in, head.d_out, batch, num_heads=num_heads, kind=kind, dropout=dropout)


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
    other_stages: list[str] = field(default_factory=list)  # a Trace's stages the prediction lacks, or the reverse

    @property
    def passed(self) -> bool:
        compared = [r for r in self.rows if r.actual is not None]
        return bool(compared) and all(r.ok for r in compared) and not self.other_stages

    def __bool__(self) -> bool:
        return self.passed

    @property
    def first_mismatch(self) -> str | None:
        return next((r.name for r in self.rows if r.actual is not None and not r.ok), None)

    def __str__(self) -> str:
        rows = [
            [r.name, format_shape(r.expected), format_shape(r.actual), "ok" if r.ok else "MISMATCH"]
            for r in self.rows
            if r.actual is not None
        ]
        lines = format_table(["stage", "predicted", "actual", ""], rows)
        compared = len(rows)
        if compared < len(self.rows) and not self.other_stages:
            unseen = [r.name for r in self.rows if r.actual is None]
            lines.append(f"(not recorded, so not compared: {', '.join(unseen)})")
        if self.passed:
            what = f"all {compared} recorded stages match" if compared > 1 else f"{rows[0][0]} matches"
            lines.append(f"shape check: {what} the prediction")
        else:
            lines.append("shape check: FAILED")
            lines += [f"  - {a}" for a in self.other_stages + self.advice]
        return "\n".join(lines)

    __repr__ = __str__


def _output_advice(prediction: ShapePrediction, actual: tuple[int, ...]) -> list[str]:
    """The seed's reading of a wrong output shape (rows = tokens, columns = d_out)."""
    expected, d_in, d_out = prediction.output_shape, prediction.d_in, prediction.d_out
    columns = prediction.output_columns
    if len(actual) != len(expected):
        return [
            f"the output has {len(actual)} dimensions, expected {len(expected)} {format_shape(expected)}: "
            "a batch dimension was added or lost"
            + (" (or the heads were not merged back)" if prediction.kind == "multihead" else "")
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
                f"the output has d_in={d_in} columns where {columns} was expected: "
                "a projection used d_in where d_out was expected (W_query/W_key/W_value must be (d_in, d_out))"
            )
        elif prediction.kind == "wrapper" and actual[-1] == d_out:
            advice.append(
                f"the output has d_out={d_out} columns, one head's: concatenate the {prediction.num_heads} heads' "
                f"outputs over the last axis ({columns})"
            )
        elif rows_ok:
            advice.append(
                f"right rows but {actual[-1]} columns instead of {columns}: look at the context stage first "
                "(context_vec = attn_weights @ values has the values' columns)"
            )
        else:
            advice.append(f"the output has {actual[-1]} columns, expected {columns}")
    return advice


def _stage_advice(qualname: str, expected: tuple[int, ...], actual: tuple[int, ...], d_in: int, d_out: int) -> str:
    name = qualname.rpartition(".")[2]  # heads.0.queries: a head's queries
    if name in ("queries", "keys", "values") and actual[-1:] == (d_in,) and d_in != d_out:
        return f"{qualname} has d_in={d_in} columns: a projection used d_in where d_out={d_out} was expected"
    if name == "attn_scores":
        return (
            f"{qualname} should be {format_shape(expected)}: one score per (query, key) pair, queries @ keys^T, "
            f"got {format_shape(actual)}"
        )
    if name == "attn_weights":
        return "attn_weights should keep the scores' (n, n) shape: the softmax changes values, not the shape"
    return (
        f"{qualname} is the first stage with a wrong shape: "
        f"expected {format_shape(expected)}, got {format_shape(actual)}"
    )


def check_shapes(prediction: ShapePrediction, actual: Trace | Mapping[str, Any] | Any) -> ShapeCheck:
    """Compare actual shapes with ``prediction``.

    ``actual`` is a Trace, a mapping of stage name -> array or shape, or a bare output (the
    context vectors only, all a user's function may give). Only stages present are compared, but
    a Trace that records stages must have every stage of the prediction and no other attention
    stage (a ``masked_scores`` or ``dropped_weights`` the prediction lacks, or the reverse, fails
    the check, named in ``other_stages``); a user's own extra stage is not compared.
    On a mismatch, ``advice`` names the first wrong stage and, for the output, what the seed says:
    d_in columns -> a projection used d_in where d_out was expected; right rows but wrong
    columns -> look at the context stage first. A Trace's stages are matched by qualified name
    ("heads.0.queries"), then by plain name; the output is the prediction's last stage
    (out_proj for multi-head; for the wrapper, context_vec with d_out * num_heads columns).

    Raises:
        ConfigError: ``prediction`` not a ShapePrediction. DTypeError: ``actual`` (or a mapping's
            value) neither an array nor, in a mapping, a shape tuple of ints (a str, None, ...).
    """
    if not isinstance(prediction, ShapePrediction):
        raise ConfigError(
            f"check_shapes expects a ShapePrediction (from predict_shapes) first, got {type(prediction).__name__}"
        )
    output_name = prediction.output_name
    if isinstance(actual, Trace):
        found: dict[str, tuple[int, ...]] = {s.qualname: s.shape for s in reversed(actual.stages)}
        for stage in actual.stages:  # a sub-module's stage counts under its plain name too
            found.setdefault(stage.name, stage.shape)
        if output_name not in found and actual.output is not None:
            found[output_name] = np.shape(to_numpy(actual.output))
    elif isinstance(actual, Mapping):
        found = {
            k: _shape_of(v, f"check_shapes: {k}", format_shape(prediction[k]), shape_ok=True)
            for k, v in actual.items()
            if k in prediction
        }
    else:
        found = {output_name: _shape_of(actual, f"check_shapes: {output_name}", format_shape(prediction.output_shape))}
    rows = [ShapeRow(s.name, s.shape, found.get(s.name)) for s in prediction.stages]
    advice: list[str] = []
    d_in, d_out = prediction.d_in, prediction.d_out
    first_bad = next((r for r in rows if r.actual is not None and not r.ok and r.name != output_name), None)
    if first_bad is not None and first_bad.actual is not None:
        advice.append(_stage_advice(first_bad.name, first_bad.expected, first_bad.actual, d_in, d_out))
    out_row = rows[-1]
    if out_row.actual is not None and not out_row.ok:
        advice += _output_advice(prediction, out_row.actual)
    if not any(r.actual is not None for r in rows):
        advice.append("no stage of the prediction was recorded")
    other = _other_stages(prediction, actual) if isinstance(actual, Trace) else []
    return ShapeCheck(rows, advice, other)


def _other_stages(prediction: ShapePrediction, trace: Trace) -> list[str]:
    """A Trace that recorded stages (npattn's modules record every one) has the prediction's
    stages and no others: a stage in one only is a different computation (a causal mask applied or
    not, dropout in training mode) or a prediction of another kind. A Trace of a module that records
    no stages (a user's own) is compared on its output only."""
    if not trace.stages:
        return []
    head_of = re.compile(r"heads\.(\d+)\.")
    model_heads = {int(m.group(1)) for s in trace.stages if (m := head_of.match(s.qualname))}
    predicted_heads = {int(m.group(1)) for s in prediction.stages if (m := head_of.match(s.name))}
    if model_heads and predicted_heads and model_heads != predicted_heads:  # the wrapper's heads.i stages
        return [
            f"the model has {len(model_heads)} heads (heads.0 to heads.{max(model_heads)}), the prediction "
            f"{len(predicted_heads)}: predict with num_heads={len(model_heads)}"
        ]
    recorded = {s.qualname for s in trace.stages} | {s.name for s in trace.stages}
    predicted = {s.name for s in prediction.stages}
    # only the stages an attention module computes count; a user's own stage ("doubled") is not compared
    extra = [
        s.qualname
        for s in trace.stages
        if s.name in _STAGE_HINTS and s.qualname not in predicted and s.name not in predicted
    ]
    problems = [
        f"the model computed {name}, which the prediction (kind={prediction.kind!r}) does not have: "
        + _STAGE_HINTS[name.rsplit(".", 1)[-1]]
        for name in dict.fromkeys(extra)
    ]
    problems += [
        f"the prediction (kind={prediction.kind!r}) has {name}, which the model did not compute: "
        + _MISSING_HINTS.get(name.rsplit(".", 1)[-1], _KIND_HINT)
        for name in (s.name for s in prediction.stages)
        if name not in recorded and name != prediction.output_name
    ]
    return problems


_KIND_HINT = "predict the kind of attention the model is (kind='self', 'causal', 'wrapper' or 'multihead')"
_STAGE_HINTS = {  # the stages npattn's attention modules record, and what one the prediction lacks means
    **dict.fromkeys(("x", "queries", "keys", "values", "attn_scores", "attn_weights", "context_vec"), _KIND_HINT),
    **dict.fromkeys(("merged_heads", "out_proj"), _KIND_HINT),
    "masked_scores": "it masks its scores (predict with kind='causal')",
    "dropped_weights": "it drops attention weights (in training mode: predict with dropout=True, or call model.eval())",
}
_MISSING_HINTS = {
    "masked_scores": "it applies no causal mask (the missing_causal_mask mistake, or predict with kind='self')",
    "dropped_weights": "it drops no attention weights (call model.train(), or predict with dropout=False)",
}


