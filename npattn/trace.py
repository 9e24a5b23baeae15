"""The seed article's debugging habit as tools: predict the shapes, trace every stage, compare.

    predict_shapes(n_tokens, d_in, d_out)   the expected shape of every stage, before running anything
                                            (num_heads=, kind= for causal and multi-head attention;
                                            predict_shapes_for(module, x) reads them off a module)
    trace(module, x)                        run a forward pass and record every stage (name, formula,
                                            input shapes, output shape, the array)
    check_shapes(prediction, actual)        compare a trace (or just an output) with the prediction and
                                            say, on a mismatch, where the seed says to look
    check_rows(x, weights, output)          the single-token check: every token's context vector
                                            computed on its own (the book's section 3.4), row by row
                                            (check_rows_of(module, x): causal and per head as it is)
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
from fnmatch import fnmatchcase
from typing import Any, TextIO

import numpy as np

from npattn import functional as F
from npattn._checks import as_array, check_positive_int
from npattn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.errors import ConfigError, ShapeError
from npattn.layers import Dropout
from npattn.module import Module

__all__ = [
    "STAGE_FORMULAS",
    "TRACE_CLASSES",
    "Comparison",
    "RowCheck",
    "ShapeCheck",
    "ShapePrediction",
    "Stage",
    "StageDiff",
    "StagePrediction",
    "Trace",
    "build_attention",
    "check_rows",
    "check_rows_of",
    "check_shapes",
    "check_weights",
    "compare",
    "kind_of",
    "predict_shapes",
    "predict_shapes_for",
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
    "merged_heads": ("context_vec.transpose(1, 2).reshape(b, n, d_out)", ("context_vec",)),
    "out_proj": ("merged_heads @ out_proj.weight^T + out_proj.bias", ("merged_heads", "out_proj")),
}
# Where a kind of attention computes a stage differently (split(t) = t.view(b, n, num_heads,
# head_dim).transpose(1, 2)); reads may be patterns ("heads.*.context_vec").
KIND_FORMULAS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "multihead": {
        "attn_scores": ("split(queries) @ split(keys)^T, per head", ("queries", "keys")),
        "attn_weights": ("softmax(attn_scores / sqrt(head_dim)) over keys", ("attn_scores",)),
        "context_vec": ("attn_weights @ split(values), per head", ("attn_weights", "values")),
    },
    "wrapper": {"context_vec": ("concat(heads.i.context_vec) over the last axis", ("heads.*.context_vec",))},
}
# npattn's attention classes by kind (subclasses count: a planted bug in a subclass keeps its kind).
_KINDS: tuple[tuple[str, tuple[type[Module], ...]], ...] = (
    ("multihead", (MultiHeadAttention,)),
    ("wrapper", (MultiHeadAttentionWrapper,)),
    ("causal", (CausalAttention,)),
    ("self", (SelfAttention_v1, SelfAttention_v2)),
)
KINDS = tuple(kind for kind, _ in _KINDS)
# A stage that reads one of these reads the latest stage of the group (masked scores, dropped weights).
_LATEST_OF = {"attn_scores": ("attn_scores", "masked_scores"), "attn_weights": ("attn_weights", "dropped_weights")}


def kind_of(module: Any) -> str | None:
    """The kind of npattn attention ``module`` is: "self" (SelfAttention_v1/v2), "causal",
    "wrapper", "multihead"; None for anything else."""
    return next((kind for kind, classes in _KINDS if isinstance(module, classes)), None)


def formula_of(name: str, kind: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(formula, names of what it reads) of stage ``name`` in attention of ``kind``; ("", ()) if unknown."""
    return KIND_FORMULAS.get(kind or "", {}).get(name) or STAGE_FORMULAS.get(name, ("", ()))


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

    def __str__(self) -> str:
        rows = [[s.name, s.formula, _shape_str(s.shape), s.change] for s in self.stages]
        head = f"predicted shapes: n_tokens={self.n_tokens}, d_in={self.d_in}, d_out={self.d_out}"
        head += f", batch={self.batch}" if self.batch is not None else ""
        head += f", num_heads={self.num_heads}" if self.num_heads is not None else ""
        head += f" ({self.kind} attention)" if self.kind != "self" else ""
        return "\n".join([head, *_table(["stage", "formula", "shape", "what changed"], rows)])

    __repr__ = __str__


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
        ConfigError: a size that is not a positive integer; an unknown kind; num_heads missing for
            a multi-head kind, given for a single-head one, or not dividing d_out (multihead);
            dropout for "self".
    """
    n = check_positive_int(n_tokens, "n_tokens")
    d_in = check_positive_int(d_in, "d_in")
    d_out = check_positive_int(d_out, "d_out")
    lead: tuple[int, ...] = () if batch is None else (check_positive_int(batch, "batch"),)
    kind = kind if kind is not None else ("self" if num_heads is None else "multihead")
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    multi = kind in ("wrapper", "multihead")
    if multi != (num_heads is not None):
        raise ConfigError(f"num_heads is {'required' if multi else 'not used'} for kind={kind!r}, got {num_heads!r}")
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


def predict_shapes_for(module: Module, x: Any) -> ShapePrediction:
    """``predict_shapes`` with the sizes, kind, heads and dropout of one of npattn's attention
    classes, for an input x (an array, or just its shape (n, d_in) or (b, n, d_in)).

    Raises:
        ConfigError: ``module`` is not one of npattn's attention classes (use predict_shapes).
        ShapeError: x is not 2-D or 3-D.
    """
    kind = kind_of(module)
    if kind is None:
        raise ConfigError(
            f"predict_shapes_for knows npattn's attention classes, got {type(module).__name__}: "
            "use predict_shapes(n_tokens, d_in, d_out, ...) with your sizes"
        )
    shape = tuple(x) if isinstance(x, tuple) else np.shape(to_numpy(x))
    if len(shape) not in (2, 3):
        raise ShapeError(f"x: expected shape (n, d_in) or (batch, n, d_in), got {shape}")
    head: Any = module.heads[0] if isinstance(module, MultiHeadAttentionWrapper) else module
    dropout = any(isinstance(m, Dropout) and m.training and m.p > 0 for m in module.modules())
    num_heads = getattr(module, "num_heads", None)
    batch = shape[0] if len(shape) == 3 else None
    return predict_shapes(shape[-2], head.d_in, head.d_out, batch, num_heads=num_heads, kind=kind, dropout=dropout)


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
    if not name.isidentifier():
        return None
    try:
        return weights_of(module, names=(name,))[name].shape
    except ConfigError:
        return None


def _input_shapes(
    module: Module, prefix: str, stages: list[Stage], reads: tuple[str, ...]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The shapes of what a stage of ``module`` (named ``prefix``) reads: its earlier stages (named
    relative to ``prefix``; a pattern such as "heads.*.context_vec" takes every match), or its weights."""
    own = [(s.qualname[len(prefix) + 1 :] if prefix else s.qualname, s) for s in stages]
    own = [(rel, s) for rel, s in own if not prefix or s.qualname.startswith(prefix + ".")]
    found: list[tuple[str, tuple[int, ...]]] = []
    for want in reads:
        candidates = _LATEST_OF.get(want, (want,))
        earlier = [(rel, s.shape) for rel, s in own if any(fnmatchcase(rel, c) for c in candidates)]
        if earlier:
            found += earlier if "*" in want else earlier[-1:]
        else:
            shape = _weight_shape(module, want)
            if shape is not None:
                found.append((want, shape))
    return tuple(found)


def trace(module: Module, x: Any, *args: Any, **kwargs: Any) -> Trace:
    """Run ``module(x, *args, **kwargs)`` recording every stage of it and of its sub-modules.

    Installs a recorder on every module of ``module.modules()``, runs forward, and restores the
    previous recorders even when forward raises. Stage names are whatever the forward passes
    record; a dotted name ("heads.0.queries", as MultiHeadAttentionWrapper passes on its heads'
    stages) belongs to that sub-module. The known names ("x", "queries", ..., "context_vec",
    "merged_heads", "out_proj") get their formula, as the module's kind of attention computes it.

    Raises:
        ConfigError: ``module`` is not an npattn Module.
        Whatever the forward raises (after restoring the recorders).
    """
    if not isinstance(module, Module):
        raise ConfigError(f"trace expects an npattn.Module, got {type(module).__name__}")
    stages: list[Stage] = []
    named = dict(module.named_modules())
    saved = [(m, m._recorder) for m in module.modules()]

    def recorder_for(prefix: str) -> Callable[[str, np.ndarray], None]:
        def record(name: str, array: np.ndarray) -> None:
            owner_name, _, name = f"{prefix}.{name}".lstrip(".").rpartition(".")
            owner = named.get(owner_name, named[prefix])
            formula, reads = formula_of(name, kind_of(owner))
            if not formula and not reads:  # an unknown stage reads the stage before it
                reads = tuple([s.name for s in stages if s.module == owner_name][-1:])
            inputs = _input_shapes(owner, owner_name, stages, reads)
            stages.append(Stage(name, owner_name, formula, inputs, np.array(array, copy=True)))

        return record

    try:
        for prefix, sub in module.named_modules():
            object.__setattr__(sub, "_recorder", recorder_for(prefix))
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


def _output_advice(prediction: ShapePrediction, actual: tuple[int, ...]) -> list[str]:
    """The seed's reading of a wrong output shape (rows = tokens, columns = d_out)."""
    expected, d_in, d_out = prediction.output_shape, prediction.d_in, prediction.d_out
    columns = prediction.output_columns
    if len(actual) != len(expected):
        return [
            f"the output has {len(actual)} dimensions, expected {len(expected)} {_shape_str(expected)}: "
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
            f"{qualname} should be {_shape_str(expected)}: one score per (query, key) pair, queries @ keys^T, "
            f"got {_shape_str(actual)}"
        )
    if name == "attn_weights":
        return "attn_weights should keep the scores' (n, n) shape: the softmax changes values, not the shape"
    return (
        f"{qualname} is the first stage with a wrong shape: expected {_shape_str(expected)}, got {_shape_str(actual)}"
    )


def check_shapes(prediction: ShapePrediction, actual: Trace | Mapping[str, Any] | Any) -> ShapeCheck:
    """Compare actual shapes with ``prediction``.

    ``actual`` is a Trace, a mapping of stage name -> array or shape, or a bare output (the
    context vectors only, all a user's function may give). Only stages present are compared.
    On a mismatch, ``advice`` names the first wrong stage and, for the output, what the seed says:
    d_in columns -> a projection used d_in where d_out was expected; right rows but wrong
    columns -> look at the context stage first. A Trace's stages are matched by qualified name
    ("heads.0.queries"), then by plain name; the output is the prediction's last stage
    (out_proj for multi-head; for the wrapper, context_vec with d_out * num_heads columns).
    """
    output_name = prediction.output_name
    if isinstance(actual, Trace):
        found: dict[str, tuple[int, ...]] = {s.qualname: s.shape for s in reversed(actual.stages)}
        for stage in actual.stages:  # a sub-module's stage counts under its plain name too
            found.setdefault(stage.name, stage.shape)
        if output_name not in found and actual.output is not None:
            found[output_name] = np.shape(to_numpy(actual.output))
    elif isinstance(actual, Mapping):
        found = {
            k: tuple(v) if isinstance(v, tuple) else np.shape(to_numpy(v)) for k, v in actual.items() if k in prediction
        }
    else:
        found = {output_name: np.shape(to_numpy(actual))}
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
    num_heads: int = 1,
    atol: float = 1e-5,
    tokens: Sequence[str] | None = None,
) -> RowCheck:
    """The seed's verification: every row of the batched ``output`` against the same token's
    context vector computed on its own (x (n, d_in) or (b, n, d_in); output like x with d_out
    columns). ``weights`` is a mapping or an object holding W_query/W_key/W_value.

    ``num_heads`` > 1: the weights' d_out columns are ``num_heads`` heads side by side (head i
    uses columns i * d_out/num_heads onwards), each computed on its own and concatenated: the
    output of MultiHeadAttentionWrapper (with its heads' weights concatenated) or the
    ``merged_heads`` stage of MultiHeadAttention (before out_proj).

    Raises:
        ShapeError: ``output`` does not have the shape (..., n, d_out) the weights give.
        ConfigError: num_heads not a positive integer dividing d_out.
    """
    if not isinstance(weights, Mapping):
        weights = weights_of(weights)
    x64, Wq, Wk, Wv = check_weights(x, weights)
    out = np.asarray(as_array(to_numpy(output), "output"), dtype=np.float64)
    d_out = Wq.shape[1]
    h = check_positive_int(num_heads, "num_heads")
    if d_out % h:
        raise ConfigError(f"num_heads={h} does not divide the weights' d_out={d_out}")
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
                        [single_token_context(xb, Wq[:, c], Wk[:, c], Wv[:, c], i, causal=causal) for c in heads]
                    )
                    for i in range(xb.shape[0])
                ]
            )
            if xb.shape[0]
            else np.zeros((0, d_out))
            for xb in flat_x
        ]
    ).reshape(expected_shape)
    row_diffs = np.max(np.abs(expected - out), axis=-1, initial=0.0)
    return RowCheck(expected, out, row_diffs, atol, tokens)


def check_rows_of(
    module: Module, x: Any, output: Any = None, *, atol: float = 1e-5, tokens: Sequence[str] | None = None
) -> RowCheck:
    """``check_rows`` for one of npattn's attention classes (causal when it is, per head when it has
    heads). ``output``: the module's output on x, or a Trace of it (default: run the module).
    For MultiHeadAttention the rows checked are the ``merged_heads`` stage (before out_proj).

    Raises:
        ConfigError: not one of npattn's attention classes.
    """
    kind = kind_of(module)
    if kind is None:
        raise ConfigError(f"check_rows_of knows npattn's attention classes, got {type(module).__name__}")
    if kind == "multihead" and not isinstance(output, Trace):
        output = trace(module, x)
    if isinstance(output, Trace):
        output = output["merged_heads"] if kind == "multihead" else output.output
    elif output is None:
        output = module(x)
    heads: Any = module.heads if isinstance(module, MultiHeadAttentionWrapper) else [module]
    per_head = [weights_of(head) for head in heads]
    weights = {n: np.concatenate([W[n] for W in per_head], axis=1) for n in WEIGHT_NAMES}
    num_heads = getattr(module, "num_heads", 1)
    return check_rows(x, weights, output, causal=kind != "self", num_heads=num_heads, atol=atol, tokens=tokens)


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
            finite = np.abs(a[np.isfinite(a)])  # masked -inf entries must not make every difference allowed
            allowed = atol + rtol * (float(np.max(finite)) if finite.size else 0.0)
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


# --class of ``npattn trace``: (class, the seed the book builds it with).
TRACE_CLASSES: dict[str, tuple[type[Module], int]] = {
    "v1": (SelfAttention_v1, 123),
    "v2": (SelfAttention_v2, 789),
    "causal": (CausalAttention, 123),
    "wrapper": (MultiHeadAttentionWrapper, 123),
    "mha": (MultiHeadAttention, 123),
}


def build_attention(name: str, d_in: int, d_out: int, n_tokens: int, *, num_heads: int = 2, seed: int = 123) -> Module:
    """One of the chapter-3 classes by its ``--class`` name, built like the book: dropout 0.0,
    context_length = n_tokens, ``num_heads`` heads for the multi-head classes, ``rng=seed``.

    Raises:
        ConfigError: an unknown name, or arguments the class refuses.
    """
    if name not in TRACE_CLASSES:
        raise ConfigError(f"unknown attention class {name!r}; choose from {', '.join(TRACE_CLASSES)}")
    cls: Any = TRACE_CLASSES[name][0]  # each class takes its own constructor arguments
    causal_args: tuple[Any, ...] = (n_tokens, 0.0) if name in ("causal", "wrapper", "mha") else ()
    head_args = (num_heads,) if name in ("wrapper", "mha") else ()
    return cls(d_in, d_out, *causal_args, *head_args, rng=seed)


def run_trace(
    n_tokens: int = 6,
    d_in: int = 3,
    d_out: int = 2,
    *,
    seed: int | None = None,
    book: bool = False,
    values: bool = False,
    attention: str | None = None,
    num_heads: int = 2,
    out: TextIO | None = None,
) -> int:
    """``npattn trace``: the prediction, the trace, the shape check and the single-token check,
    printed to ``out`` (stdout). Returns 0 when both checks pass, else 1.

    ``attention``: None for SelfAttention_v1 on 2-D input, or a ``TRACE_CLASSES`` name ("v1",
    "v2", "causal", "wrapper", "mha") for that class on a batch of two sequences (dropout 0.0,
    context_length = n_tokens, ``num_heads`` heads). With ``book`` the book's input (its batch
    for a class) and its seeds (789 for v2, else 123): 6 tokens, d_in=3, d_out=2. ``seed``
    (default 123) seeds the weights and the random input otherwise.

    Raises:
        ConfigError: a size that is not a positive integer; an unknown class; sizes a class refuses.
    """
    out = out if out is not None else sys.stdout
    tokens: Sequence[str] | None = None
    model: Module
    name = attention or "v1"
    if book:
        n_tokens, d_in, d_out, num_heads = 6, 3, 2, 2
        seed = TRACE_CLASSES[name][1] if name in TRACE_CLASSES else 123
        x, tokens = (book_batch() if attention else book_inputs()), BOOK_TOKENS
    else:
        seed = 123 if seed is None else seed
        n = check_positive_int(n_tokens, "n_tokens")
        x = np.random.default_rng(seed).random(((2,) if attention else ()) + (n, d_in)).astype(np.float32)
    model = build_attention(name, d_in, d_out, n_tokens, num_heads=num_heads, seed=seed)
    if attention:
        where = "the book's input batch" if book else f"{n_tokens} random tokens"
        print(f"{type(model).__name__}({model.extra_repr()}, rng={seed}) on {where} {_shape_str(x.shape)}", file=out)
    if book:
        print(
            f'the book\'s example: "Your journey starts with one step", weights of torch.manual_seed({seed})', file=out
        )
    elif not attention:
        print(f"SelfAttention_v1({d_in}, {d_out}, rng={seed}) on {n_tokens} random tokens", file=out)
    print(file=out)
    prediction = predict_shapes_for(model, x)
    print("1. predict the shapes before running anything", file=out)
    print(prediction, file=out)
    recorded = trace(model, x)
    print("\n2. run it and record every stage", file=out)
    print(recorded, file=out)
    shape_check = check_shapes(prediction, recorded)
    print("\n3. compare the trace with the prediction", file=out)
    print(shape_check, file=out)
    row_check = check_rows_of(model, x, recorded, tokens=tokens)
    print("\n4. " + str(row_check), file=out)
    if isinstance(model, MultiHeadAttention):
        print("  (rows of merged_heads, before out_proj: every head's context vectors side by side)", file=out)
    if book and attention is None:
        alone = ", ".join(f"{v:.4f}" for v in row_check.expected[1])
        print(f"  row 2 (journey) computed on its own: [{alone}], the book's context_vec_2 of section 3.4", file=out)
    output = np.asarray(recorded.output)
    print(
        f"\n{prediction.output_name}" + (" (first sequence of the batch)" if output.ndim == 3 else "") + ":", file=out
    )
    print(_format_rows(output[0] if output.ndim == 3 else output, tokens), file=out)
    if values:
        for stage in recorded:
            print(f"\n{stage.qualname} {_shape_str(stage.shape)}:", file=out)
            print(_format_rows(stage.array, tokens if stage.shape[0] == len(tokens or ()) else None), file=out)
    return 0 if shape_check and row_check else 1
