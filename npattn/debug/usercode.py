"""Check a user's own attention implementation: ``npattn check FILE.py:NAME``.

The user's attention is either a class (or an instance) with ``W_query``, ``W_key`` and
``W_value`` attributes and a ``forward``/``__call__`` taking x, like the book's
SelfAttention_v1 (NumPy arrays, npattn Parameters, torch Parameters or Linear layers), or a
function ``f(x, W_query, W_key, W_value)`` of NumPy arrays. It runs on the book's input with
the seed-123 weights of ``SelfAttention_v1(3, 2, rng=123)``; the report holds the shape
check, the single-token row check and the diagnosis.

A class is built with the book's call forms: ``NAME(d_in, d_out)``, else (a constructor that
needs them) ``NAME(d_in, d_out, context_length=6, dropout=0.0)``, like CausalAttention, or, when
the constructor has a ``num_heads`` parameter, ``NAME(d_in, d_out, context_length=6, dropout=0.0,
num_heads=2)`` like MultiHeadAttention (without an output projection; d_out=4, the weights of
``MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)``). An attention built that way, or
holding a ``mask`` (the book's causal buffer), is causal: it runs on the book's batch (2, 6, 3)
and is checked and diagnosed as causal attention.

With a backward (a function pair ``NAME_forward``/``NAME_backward``, or a class with
``backward(d_out)``), the report adds the backward check (``npattn.debug.backcheck``): every
gradient against finite differences of the user's own forward and against npattn's, and the
catalogued backward mistake; a causal class is also checked with dropout=0.2.

Loading the user's attention (UserAttention, load_attention, ...) moved to npattn.debug.userattention.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np

from npattn._checks import as_array
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.debug.backcheck import check_backward
from npattn.debug.backvariant import attention_reference
from npattn.debug.checkreport import CheckReport, second_input_problem
from npattn.debug.diagnose import Diagnosis, Symptom, diagnose, not_judged_reason, within_float16_noise
from npattn.debug.formulas import WEIGHT_NAMES
from npattn.debug.predict import ShapeCheck, check_shapes, predict_shapes
from npattn.debug.rows import RowCheck, check_rows
from npattn.debug.tolerance import matches
from npattn.debug.userattention import (
    BOOK_CONTEXT_LENGTH,
    NUM_HEADS,
    UserAttention,
    _is_torch,
    attention_from_module,
    load_attention,
    neutral_extras,
)
from npattn.debug.userbackward import DROPOUT_P, dropout_check, kept_random_state
from npattn.debug.weights import check_weights, describe_value, returned_array, to_numpy, weights_of
from npattn.errors import ConfigError, DTypeError, NpattnError, ShapeError
from npattn.nn.attention import MultiHeadAttention, SelfAttention_v1

__all__ = [
    "CheckReport",
    "UserAttention",
    "attention_from_module",
    "book_weights",
    "check_attention",
    "load_attention",
    "multihead_diagnosis",
    "multihead_weights",
    "run_check",
    "second_shape_inputs",
]


def book_weights() -> dict[str, np.ndarray]:
    """The weights of ``SelfAttention_v1(3, 2, rng=123)``: the book's torch.manual_seed(123) draws."""
    return weights_of(SelfAttention_v1(3, 2, rng=123))


def multihead_weights() -> dict[str, np.ndarray]:
    """The weights of ``MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)``: d_out=4, head_dim=2."""
    return weights_of(MultiHeadAttention(3, 4, BOOK_CONTEXT_LENGTH, 0.0, num_heads=NUM_HEADS, rng=123))


SECOND_SHAPE = {"n_tokens": 5, "d_in": 4, "d_out": 3}
"""The second shape every learner's attention is checked at (with ``npattn check``'s defaults):
code right only at the book's sizes (sqrt(2) for d_out=2, six tokens, three inputs) fails there."""
SECOND_SEED = 7


def second_shape_inputs(
    causal: bool, num_heads: int | None, batched: bool = False
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """x and weights of the second shape: n=5, d_in=4, d_out=3 (multi-head: d_out=6, head_dim=3),
    x uniform on [0, 1) in float32 like the book's embeddings, a batch of 2 for causal attention (and
    with ``batched`` for self-attention), weights as npattn's class draws them (seed ``SECOND_SEED``)."""
    n, d_in, d_out = SECOND_SHAPE["n_tokens"], SECOND_SHAPE["d_in"], SECOND_SHAPE["d_out"]
    rng = np.random.default_rng(SECOND_SEED)
    if num_heads:
        W = weights_of(MultiHeadAttention(d_in, d_out * num_heads, BOOK_CONTEXT_LENGTH, 0.0, num_heads=num_heads,
                                          rng=SECOND_SEED))
        return rng.uniform(0.0, 1.0, (2, n, d_in)).astype(np.float32), W
    x = rng.uniform(0.0, 1.0, (2, n, d_in) if causal or batched else (n, d_in)).astype(np.float32)  # as the book's
    return x, weights_of(SelfAttention_v1(d_in, d_out, rng=SECOND_SEED))


def check_attention(
    attention: UserAttention | str, *, x: np.ndarray | None = None, weights: Mapping[str, Any] | None = None
) -> CheckReport:
    """Run a user's attention (a UserAttention or a ``FILE.py:NAME`` spec) on x (default: the
    book's input) with ``weights`` (default: the seed-123 weights) and check its output.

    Raises:
        ConfigError: ``attention`` of another kind; from ``load_attention``; weights the user's object
            cannot hold; x or the weights holding NaN or inf.
        ShapeError, DTypeError: x that does not fit the weights (checked before the user's code runs);
            an output that is not real numbers (complex, strings, objects).
        NpattnError: whatever the user's code raised, wrapped with its name and message.
    """
    if not isinstance(attention, (UserAttention, str)):
        raise ConfigError(
            "check_attention: expected a 'FILE.py:NAME' spec or a UserAttention "
            f"(npattn.debug.usercode.attention_from_module(module, NAME)), got {type(attention).__name__}"
        )
    user = load_attention(attention) if isinstance(attention, str) else attention
    # The second shape's inputs are made before the user's code runs (it may patch NumPy).
    second = {causal: second_shape_inputs(causal, user.num_heads) for causal in (False, True)}
    batch = second_shape_inputs(False, None, batched=True)
    with kept_random_state():
        report = _check(user, x, weights)
    if x is None and weights is None and user.kind != "instance":  # an instance has its sizes fixed
        x2, W2 = second[report.causal]
        report.second_shape = "n={}, d_in={}, d_out={}".format(x2.shape[-2], *W2["W_query"].shape)
        if not report.causal and not user.num_heads:
            _on_a_batch(user, report, *batch)
        if not report.second_batched:
            try:
                with kept_random_state():
                    report.second = _check(user, x2, W2, with_dropout=False)
            except NpattnError as exc:
                report.second_error = str(exc)
            except Exception as exc:  # npattn's own code, after the user's code changed what it calls
                report.second_error = f"{user.name} left npattn unable to run ({type(exc).__name__}: {exc})"
    return report


def _on_a_batch(user: UserAttention, report: CheckReport, x: np.ndarray, W: dict[str, np.ndarray]) -> None:
    """Self-attention at the second shape on a batch (2, n, d_in) first: softmax over dim=1, the
    book's axis for one sequence's (n, n) scores, is wrong for a batch's (b, n, n), and a backward
    may be wrong for 3-D input only (they passed on one sequence). Code that does not run on a batch
    (the book's ``keys.T`` takes one sequence) is checked on one sequence instead, with a note."""
    try:
        with kept_random_state(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's warning for the book's keys.T on 3-D, before it fails
            report.second = _check(user, x, W, with_dropout=False)
    except Exception as exc:  # it takes one sequence: the caller checks it on one
        raised = type(exc.__cause__ or exc).__name__  # the user's own exception, not npattn's wrapper
        report.second_note = (
            f"one sequence: {user.name} takes one sequence (n, d_in) (on a batch {x.shape} it raised {raised}), "
            "so it is checked on one"
        )
        return
    backward = report.second.backward
    if backward is not None and backward.raised and report.second.diagnosis.correct:  # its backward takes one
        report.second = None
        report.second_note = (
            f"one sequence: {user.name}'s backward takes one sequence (n, d_in) (on a batch {x.shape} it raised "
            f"{backward.raised}), so it is checked on one"
        )
        return
    report.second_batched = True
    report.second_shape = "batch={}, n={}, d_in={}, d_out={}".format(*x.shape[:2], *W["W_query"].shape)


def _check(
    user: UserAttention, x: np.ndarray | None, weights: Mapping[str, Any] | None, *, with_dropout: bool = True
) -> CheckReport:
    if weights is not None:
        W = weights_of(weights)
    else:
        W = multihead_weights() if user.num_heads else book_weights()
    # x and the weights are checked before any of the user's code runs (without x: the weights alone)
    check_weights(x if x is not None else np.zeros((1, np.shape(W["W_query"])[0])), W)
    run = user.prepare(W)
    causal = user.causal
    if x is None:
        x = book_batch() if causal else book_inputs()  # the book runs its causal classes on the batch
    x = as_array(to_numpy(x), "x")  # real numbers, a float dtype kept (ints and bools become float64)
    check_weights(x, W)
    if user.num_heads and x.ndim != 3:
        raise ShapeError(f"x: multi-head attention is checked on a batch (batch, n, d_in), got shape {x.shape}")
    try:
        returned = run(np.array(x))  # a copy: the user's code may write into its input
    except NpattnError:
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
        raise ConfigError(f"{user.name} raised {type(exc).__name__}: {exc}{where}") from exc
    if user.pair and isinstance(returned, tuple):  # (out, cache) of arrays that stack: never read as one array
        said = f"{user.name} returned {describe_value(returned)}, expected the output alone (it returns (output, cache)"
        raise DTypeError(f"{said} next to its backward): {user.pair}")
    output = returned_array(returned, user.name, user.pair)  # npattn's conversion, outside the user's code
    # copied now: code that writes every result into one buffer of its own would change this output at its
    # next call (the report printed another call's values, and the check outside the process disagreed)
    output = np.array(output, copy=True)
    if output.dtype.kind not in "fiu":  # never compared after a silent conversion (complex, strings, objects)
        what = "None (a missing return?)" if returned is None else f"an output of dtype {output.dtype}"
        raise DTypeError(f"{user.name} returned {what}, expected a real floating array")
    n, d_in = x.shape[-2:]
    d_out = W["W_query"].shape[1]
    batch = x.shape[0] if x.ndim == 3 else None
    kind = "causal" if causal else "self"
    if user.num_heads:
        prediction = predict_shapes(n, d_in, d_out, batch=batch, num_heads=user.num_heads, kind="multihead")
    else:
        prediction = predict_shapes(n, d_in, d_out, batch=batch, kind=kind)
    shape_check = check_shapes(prediction, output)
    row_check: RowCheck | None = None
    skipped = ""
    if user.num_heads:
        skipped = "single-token check: skipped for multi-head attention (the output is compared as a whole below)"
        diagnosis = multihead_diagnosis(x, W, output, user.num_heads, shape_check)
    elif output.shape == (*x.shape[:-1], d_out):
        row_check = check_rows(x, W, output, causal=causal, tokens=BOOK_TOKENS if n == len(BOOK_TOKENS) else None)
    else:
        skipped = f"single-token check: skipped (the output's shape {output.shape} has no row per token to compare)"
    if not user.num_heads:
        diagnosis = diagnose(x, W, output, causal=causal)
    report = CheckReport(
        user.name, user.kind, output, shape_check, row_check, skipped, diagnosis, causal, user.built_as,
        num_heads=user.num_heads, note=user.note,
    )
    if output.dtype.kind == "f" and output.dtype.itemsize < 4:  # a float16 output: about 3 digits
        half = (
            f"note: {user.name} returned {output.dtype} (about 3 significant digits): the check allows float16's "
            "rounding (0.05% of each column's largest value); beyond it, within what float16 arithmetic itself "
            "errs on the input, the output is NOT JUDGED (exit code 3); return float32 or float64 to have it judged"
        )
        report.note = f"{report.note}\n{half}" if report.note else half
    if (report.diagnosis.correct or report.diagnosis.not_judged) and set(W) == set(WEIGHT_NAMES):
        report.stale = second_input_problem(run, user.name, x, W, causal=causal, num_heads=user.num_heads)
    if user.has_backward:
        title = "4. backward: loss = sum(output * G), G random normal (seed 0), float64"
        forward, backward = user.backward_callables()
        report.backward = check_backward(
            forward, backward, x, W, name=user.name, title=title, causal=causal, num_heads=user.num_heads
        )
    forward_only = report.diagnosis.correct and not _is_torch(user.obj)  # torch's dropout: not np.random's
    unjudged = bool(report.diagnosis.not_judged)
    if causal and user.kind == "class" and with_dropout and unjudged and not _is_torch(user.obj):
        report.dropout_note = (
            f"5. dropout: not checked: {user.name}'s output is not judged (float16), so no keep mask can be read "
            "back from it; return float32 or float64 to have its dropout checked"
        )
    if causal and user.kind == "class" and with_dropout and _is_torch(user.obj):
        report.dropout_note = (
            f"5. dropout: not checked: {user.name} is a torch class, whose dropout mask comes from torch's random "
            "stream, not np.random (the check reads the keep mask back from np.random's draws); its forward was "
            "checked with dropout=0.0 only"
        )
    if causal and user.kind == "class" and with_dropout and (user.has_backward or forward_only) and not unjudged:
        obj = user._construct(d_in, d_out, dropout=DROPOUT_P)
        neutral_extras(obj, d_out, user.name)
        report.dropout, report.dropout_note = dropout_check(
            obj, user.name, x, W, num_heads=user.num_heads, backward_too=user.has_backward
        )
    return report


def multihead_diagnosis(
    x: np.ndarray, W: Mapping[str, np.ndarray], output: np.ndarray, num_heads: int,
    shape_check: ShapeCheck | None = None,
) -> Diagnosis:  # fmt: skip
    """The output (b, n, d_out) against npattn's multi-head causal attention (no catalogue of forward
    mistakes) of x (b, n, d_in) with the weights (d_in, d_out); ``shape_check`` of the output (default:
    made here)."""
    x64 = np.asarray(x, dtype=np.float64)
    if shape_check is None:
        n, d_in = x64.shape[-2:]
        prediction = predict_shapes(n, d_in, np.shape(W["W_query"])[1], batch=x64.shape[0], num_heads=num_heads,
                                    kind="multihead")
        shape_check = check_shapes(prediction, output)
    expected, _ = attention_reference(x64, {n: np.asarray(w, np.float64) for n, w in W.items()}, causal=True,
                                      num_heads=num_heads)
    out = np.asarray(output, dtype=np.float64)
    symptoms: list[Symptom] = []
    max_diff = None
    if out.shape != expected.shape:
        symptoms.append(Symptom("shape_mismatch", f"output shape {out.shape}, expected {expected.shape}"))
    else:
        with np.errstate(invalid="ignore"):
            max_diff = float(np.nanmax(np.where(np.isfinite(out), np.abs(out - expected), np.inf)))
    if not np.all(np.isfinite(out)):
        symptoms.append(Symptom("non_finite", "the output holds NaN or inf"))
    correct = matches(output, expected)
    not_judged = ""
    if not correct:
        Ws = [np.asarray(W[n], np.float64) for n in WEIGHT_NAMES]
        noise = within_float16_noise(x64, Ws, None, output, expected, causal=True, num_heads=num_heads)
        not_judged = "" if noise is None else not_judged_reason(noise)
    return Diagnosis(
        correct, (), tuple(symptoms), (), max_diff, expected, out, shape_check, True,
        label=f"multi-head causal attention, {num_heads} heads, no output projection", not_judged=not_judged,
    )


def run_check(spec: str, *, out: TextIO | None = None) -> int:
    """``npattn check FILE.py:NAME``: print the report; returns 0 when correct, 1 when wrong, 3 when
    not judged (a float16 output within float16 arithmetic's own error).

    Raises:
        ConfigError: see ``load_attention`` and ``check_attention`` (the CLI prints it, exit 2).
    """
    report = check_attention(spec)
    print(report, file=out or sys.stdout)
    return 0 if report else 3 if report.not_judged else 1
