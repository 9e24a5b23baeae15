"""npattn trace: predict the shapes, trace every stage, check the shapes and every row, printed."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from npattn._checks import check_bytes, check_positive_int
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.debug.formulas import format_shape
from npattn.debug.predict import check_shapes, format_bytes, predict_shapes_for
from npattn.debug.rows import check_rows_of
from npattn.debug.trace import trace
from npattn.errors import ConfigError
from npattn.nn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.nn.module import Module

__all__ = ["TRACE_CLASSES", "build_attention", "run_trace"]


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
        ConfigError: a size that is not a positive integer; an unknown class; sizes a class refuses;
            sizes whose trace (every stage recorded, twice ``predict_shapes``' total: the copies and
            the forward's own arrays) needs more bytes than this machine's memory.
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
    if not book:  # the weights are drawn before the trace's own estimate can be made: refuse them first
        copies = (num_heads if name == "wrapper" else 1) * 3 * d_in * d_out + (d_out * d_out if name == "mha" else 0)
        check_bytes(2 * 8 * copies, f"building {name}'s weights for d_in={d_in}, d_out={d_out}")  # float64 draws
    model = build_attention(name, d_in, d_out, n_tokens, num_heads=num_heads, seed=seed)
    prediction = predict_shapes_for(model, x)
    # The trace keeps a copy of every stage while the forward holds its own: twice the prediction.
    stages = prediction.total_bytes(x.dtype)
    kept = f"every stage recorded, {format_bytes(stages)}, and the forward's own"
    check_bytes(2 * stages, f"tracing {n_tokens} tokens ({kept})")
    if attention:
        where = "the book's input batch" if book else f"{n_tokens} random tokens"
        print(f"{type(model).__name__}({model.extra_repr()}, rng={seed}) on {where} {format_shape(x.shape)}", file=out)
    if book:
        print(
            f'the book\'s example: "Your journey starts with one step", weights of torch.manual_seed({seed})', file=out
        )
    elif not attention:
        print(f"SelfAttention_v1({d_in}, {d_out}, rng={seed}) on {n_tokens} random tokens", file=out)
    print(file=out)
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
            print(f"\n{stage.qualname} {format_shape(stage.shape)}:", file=out)
            print(_format_rows(stage.array, tokens if stage.shape[0] == len(tokens or ()) else None), file=out)
    return 0 if shape_check and row_check else 1


