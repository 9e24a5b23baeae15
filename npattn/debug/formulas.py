"""The stages of chapter-3 attention by name: each stage's formula, what it reads, and the kinds of
attention npattn's classes are; shared formatting for the debugging tools' tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from npattn.nn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.nn.module import Module

__all__ = [
    "CLASSES_BY_KIND",
    "KINDS",
    "KIND_FORMULAS",
    "LATEST_OF",
    "STAGE_FORMULAS",
    "WEIGHT_NAMES",
    "format_shape",
    "format_table",
    "formula_of",
    "kind_of",
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
CLASSES_BY_KIND: tuple[tuple[str, tuple[type[Module], ...]], ...] = (
    ("multihead", (MultiHeadAttention,)),
    ("wrapper", (MultiHeadAttentionWrapper,)),
    ("causal", (CausalAttention,)),
    ("self", (SelfAttention_v1, SelfAttention_v2)),
)

KINDS = tuple(kind for kind, _ in CLASSES_BY_KIND)
# A stage that reads one of these reads the latest stage of the group (masked scores, dropped weights).
LATEST_OF = {"attn_scores": ("attn_scores", "masked_scores"), "attn_weights": ("attn_weights", "dropped_weights")}


def kind_of(module: Any) -> str | None:
    """The kind of npattn attention ``module`` is: "self" (SelfAttention_v1/v2), "causal",
    "wrapper", "multihead"; None for anything else."""
    return next((kind for kind, classes in CLASSES_BY_KIND if isinstance(module, classes)), None)


def formula_of(name: str, kind: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(formula, names of what it reads) of stage ``name`` in attention of ``kind``; ("", ()) if unknown."""
    return KIND_FORMULAS.get(kind or "", {}).get(name) or STAGE_FORMULAS.get(name, ("", ()))


def format_shape(shape: tuple[int, ...] | None) -> str:
    return "-" if shape is None else "(" + ", ".join(map(str, shape)) + ")"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns, a rule under the header."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return lines


