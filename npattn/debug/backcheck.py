"""Check a hand-written backward: every gradient against finite differences and against npattn's.

``check_backward(forward, backward, x, weights)`` takes the user's code as two callables,
``forward(x, weights) -> output`` and ``backward(x, weights, grad_output) -> {"x", "W_query",
"W_key", "W_value"}`` (``npattn.debug.usercode`` builds them from a function pair or a class),
and reports for each gradient tensor:

- against central differences of the user's *own* forward, in float64 (eps = 1e-6): is the
  backward the derivative of the forward it belongs to?
- against npattn's analytical gradient: is it the derivative of correct attention?

each with the tolerance used (|error| <= atol + rtol * max|gradient|) and the margin
(allowed / error), so "float noise or a bug?" has an answer; then ``diagnose_backward`` names the
mistake. User code always receives copies of x and the weights.
"""

from __future__ import annotations

import itertools
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn import _html
from npattn._checks import check_finite
from npattn.debug.backsecond import second_backward_problem, second_input
from npattn.debug.backward import (
    GRAD_NAMES,
    BackwardDiagnosis,
    attention_reference,
    backward_variant,
    diagnose_backward,
)
from npattn.debug.tolerance import FLOAT32_RTOL, check_tolerances, largest, matches
from npattn.debug.weights import check_weights, gradient_array
from npattn.errors import ConfigError
from npattn.gradcheck import DETECTS, TensorCheck, _compare, difference_noise, max_relative_error

__all__ = ["BackwardCheck", "GradientRow", "check_backward", "describe_exception", "recover_keep"]

# How close to npattn's gradient a backward must be when the forward computes in float32 (machine
# epsilon 1.2e-7, a few operations deep), relative to each gradient's magnitude; every catalogued
# mistake is off by far more.
FLOAT32_TOLERANCE = (0.0, FLOAT32_RTOL)

Forward = Callable[[np.ndarray, Mapping[str, np.ndarray]], Any]
Backward = Callable[[np.ndarray, Mapping[str, np.ndarray], np.ndarray], Mapping[str, Any]]


def describe_exception(name: str, exc: BaseException) -> str:
    """``NAME raised TypeError: message (at file:line, in function)``: one line, no traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    return f"{name} raised {type(exc).__name__}: {exc}{where}"


@dataclass
class GradientRow:
    """One gradient tensor: against finite differences (``numerical``) and npattn (``analytical``).

    ``problem`` is set instead when the tensor is missing, of the wrong shape, or not finite.
    """

    name: str
    expected_shape: tuple[int, ...]
    numerical: TensorCheck | None = None
    analytical: TensorCheck | None = None
    problem: str = ""
    judged_by_differences: bool = True  # False: the user's forward loses precision, npattn's gradient judges

    @property
    def passed(self) -> bool:
        judge = self.numerical if self.judged_by_differences else self.analytical
        return not self.problem and bool(judge and judge.passed)

    @property
    def correct(self) -> bool:
        return self.passed and bool(self.analytical and self.analytical.passed)


def _margin(c: TensorCheck) -> str:
    """allowed / error when it passes ("306x"); error / allowed when it fails ("4.1e+05x over")."""
    if c.margin == float("inf"):
        return "inf"
    if c.margin == 0.0:  # nothing allowed (a gradient that must be exactly zero) and an error
        return "inf over"
    return f"{c.margin:.3g}x" if c.passed else f"{1 / c.margin:.2g}x over"


@dataclass
class BackwardCheck:
    """The backward check of ``npattn check``; truthy when every gradient matches finite
    differences of the user's forward and npattn's gradient."""

    title: str
    rows: list[GradientRow] = field(default_factory=list)
    diagnosis: BackwardDiagnosis | None = None
    error: str = ""
    eps: float = 1e-6
    atol: float = 1e-8
    rtol: float = 1e-6
    forward_wrong: bool = False  # the error is the forward's (it raised, or no correct attention gives its output)
    forward_matches: bool = False  # the forward's output equals npattn's (relative 1e-5)
    precision_note: str = ""  # set when finite differences of the user's forward are float noise
    raised: str = ""  # the type of the exception the user's backward raised (it ran on nothing it takes?)

    @property
    def judge(self) -> str:
        """What the gradients were judged against: "finite differences" of the user's forward, or
        "npattn's gradient" when the user's forward loses precision."""
        return "npattn's gradient" if self.precision_note else "finite differences"

    @property
    def consistent(self) -> bool:
        """The backward is the derivative of the user's own forward (of npattn's when that forward
        loses precision)."""
        return not self.error and bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def passed(self) -> bool:
        return self.consistent and all(r.correct for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    def _table(self) -> tuple[list[str], list[list[str]]]:
        """Two rows per tensor: against finite differences of the user's forward, against npattn's."""
        header = ["gradient", "shape", "against", "max abs err", "max rel err", "allowed", "margin", "result"]
        rows = []
        for r in self.rows:
            shape = "(" + ", ".join(map(str, r.expected_shape)) + ")"
            if r.problem:
                rows.append([f"d{r.name}", shape, r.problem, "", "", "", "", "FAIL"])
                continue
            for against, c in (("finite differences", r.numerical), ("npattn's gradient", r.analytical)):
                assert c is not None
                unused = against[0] == "f" and not r.judged_by_differences
                rows.append(
                    [
                        f"d{r.name}" if against[0] == "f" else "",
                        shape if against[0] == "f" else "",
                        against,
                        f"{c.max_abs_error:.3e}",
                        f"{c.max_rel_error:.3e}",
                        f"{c.allowed:.2e}",
                        _margin(c),
                        "(not used)" if unused else "ok" if c.passed else "FAIL",
                    ]
                )
        return header, rows

    def verdict(self) -> str:
        if self.error and self.forward_wrong and self.title.startswith("5. forward"):  # a class without a backward
            return f"forward: FAILED ({self.error})"
        if self.error and self.forward_wrong:
            return f"backward: not checked: the forward failed ({self.error})"
        if self.error:
            return f"backward: FAILED ({self.error})"
        if self.passed and self.precision_note:
            return "backward: PASSED (every gradient matches npattn's gradient, the judge here: see the note above)"
        if self.passed:
            return "backward: PASSED (every gradient matches finite differences of your forward and npattn's gradient)"
        if self.consistent and self.forward_matches:
            wrong = [f"d{r.name}" for r in self.rows if not r.correct]
            return (
                f"backward: FAILED: {', '.join(wrong)} {'differs' if len(wrong) == 1 else 'differ'} from npattn's "
                "gradient; "
                "your forward is correct attention and finite differences of it cannot resolve a difference "
                "this small at these magnitudes"
            )
        if self.consistent:
            return (
                "backward: FAILED: your backward is the derivative of your forward, but the forward is not "
                "correct attention (fix the forward first)"
            )
        found = [f"d{r.name}: {r.problem}" for r in self.rows if r.problem]
        bad = [f"d{r.name}" for r in self.rows if not r.passed and not r.problem]
        if bad:
            against = "npattn's gradient" if self.precision_note else "finite differences of your own forward"
            found.append(f"{', '.join(bad)} {'differs' if len(bad) == 1 else 'differ'} from {against}")
        return f"backward: FAILED ({'; '.join(found)})"

    def __str__(self) -> str:
        lines = [self.title]
        if self.rows:
            header, rows = self._table()
            widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

            def fmt(row: list[str]) -> str:
                cells = [str(c).rjust(w) if 2 < i < 7 else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
                return "  ".join(cells).rstrip()

            lines += [fmt(header), "-" * len(fmt(header)), *(fmt(r) for r in rows)]
            lines.append(
                f"(eps={self.eps:g}; a tensor passes when max|error| <= atol + rtol * max|gradient|, "
                f"atol={self.atol:.2g} against finite differences (their rounding noise), 0 against npattn's, "
                f"rtol={self.rtol:g}; margin = allowed / error)"
            )
        if self.precision_note:
            lines.append(self.precision_note)
        lines.append(self.verdict())
        if self.diagnosis is not None:
            lines += [*self.diagnosis.lines()]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        header, rows = self._table()
        parts = [_html.table(header, rows, caption=self.title)] if rows else []
        return _html.wrap(*parts, text="\n".join([self.verdict(), *(self.diagnosis.lines() if self.diagnosis else [])]))


def _against(name: str, user: np.ndarray, reference: np.ndarray, atol: float, rtol: float) -> TensorCheck:
    """A TensorCheck of ``user`` against npattn's gradient (in the ``numerical`` slot)."""
    error = np.abs(user - reference)
    allowed = atol + rtol * float(np.max(np.abs(reference), initial=0.0))
    if error.size == 0:
        return TensorCheck(name, user.shape, 0.0, 0.0, allowed, (), 0.0, 0.0)
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    return TensorCheck(
        name,
        user.shape,
        float(error[worst]),
        max_relative_error(error, reference),
        allowed,
        tuple(int(i) for i in worst),
        float(reference[worst]),
        float(user[worst]),
    )


def check_backward(
    forward: Forward,
    backward: Backward,
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    *,
    name: str = "backward",
    title: str = "backward",
    causal: bool = False,
    num_heads: int | None = None,
    keep: np.ndarray | None = None,
    p: float = 0.0,
    seed: int = 0,
    eps: float = 1e-6,
    atol: float | None = None,
    rtol: float = 1e-6,
) -> BackwardCheck:
    """Run the user's backward on L = sum(output * G), G random normal (``seed``), in float64.

    Each gradient passes when max|error| <= atol + rtol * max|gradient|, against finite differences
    of the user's forward and against npattn's gradient. atol unset: against finite differences,
    ``DIFFERENCE_NOISE`` times their rounding noise (2.2e-16 * sum|output * G| / eps, about 1e-8 at
    the book's scale); against npattn's exact gradient, 0. Both shrink with the values, so scaling
    x and the weights down does not make a wrong gradient pass.

    Never raises for the user's mistakes: an exception in the user's code, a gradient that is
    missing, of the wrong shape, or holds NaN/inf is reported in the BackwardCheck.

    Raises:
        ConfigError: atol, rtol or eps negative or not finite; rtol >= 1e-4; ``weights`` missing a
            weight, holding a key it does not know, a nonzero bias, or NaN/inf (as x may not).
        ShapeError: x and the weights of shapes that do not fit together.
    """
    atol, rtol = check_tolerances(atol, rtol, "check_backward", DETECTS)
    if not check_finite(eps, "eps") > 0:
        raise ConfigError(f"check_backward: eps must be > 0, got {eps}")
    x64, *Ws = check_weights(x, weights)  # a missing or unknown key, a bias, shapes, NaN: before any user code
    x64 = np.array(x64, dtype=np.float64)  # copies: the user's code must not see the caller's arrays
    W64 = {n: np.array(w, dtype=np.float64) for n, w in zip(GRAD_NAMES[1:], Ws)}
    settings: dict[str, Any] = {"causal": causal, "num_heads": num_heads, "keep": keep, "p": p}
    expected_out, _ = attention_reference(x64, W64, **settings)
    G = np.random.default_rng(seed).standard_normal(expected_out.shape)
    report = BackwardCheck(title, eps=eps, atol=atol or 0.0, rtol=rtol)

    dtypes: list[np.dtype] = []

    def run_forward(x_in: np.ndarray = x64) -> np.ndarray:
        raw = forward(x_in.copy(), {n: w.copy() for n, w in W64.items()})
        out, problem = gradient_array(raw, expected_out.shape)
        if out is None:
            what = f"has {problem}" if problem.startswith("shape") else f"is {problem}"
            raise ConfigError(f"the forward's output {what}, expected a real array of shape {expected_out.shape}")
        dtypes.append(np.asarray(raw).dtype)
        return out

    try:
        out = run_forward()
    except ConfigError as exc:
        report.error, report.forward_wrong = f"{exc}; backward not checked", True
        return report
    except Exception as exc:
        report.error, report.forward_wrong = describe_exception(f"{name}'s forward", exc), True
        return report
    try:
        grads = dict(backward(x64.copy(), {n: w.copy() for n, w in W64.items()}, G.copy()))
    except ConfigError as exc:  # what the user's backward returned does not fit
        report.error = str(exc)
        return report
    except Exception as exc:
        report.error, report.raised = describe_exception(f"{name}'s backward", exc), type(exc).__name__
        return report
    reference = backward_variant(x64, W64, G, **settings)
    report.forward_matches = matches(out, expected_out)
    if report.forward_matches:  # a second input of the same shape: a cached output or weights shows
        x_second = second_input(x64, seed)
        try:
            second_right = matches(run_forward(x_second), attention_reference(x_second, W64, **settings)[0])
        except Exception as exc:
            report.error, report.forward_wrong = describe_exception(f"{name}'s forward", exc), True
            return report
        if not second_right:
            report.error, report.forward_wrong = (
                f"{name}'s forward is right for the first input but wrong for a second input of the same shape "
                "(it reuses something from the first call: a cached output, attention weights, ...); backward "
                "not checked",
                True,
            )
            return report
    exact_atol = atol or 0.0  # against npattn's float64 gradient: relative to each tensor
    if atol is None:  # against finite differences: their rounding noise
        atol = difference_noise(out, G, eps)
    report.atol = atol

    def loss() -> float:
        with np.errstate(all="ignore"):
            return float(np.sum(run_forward() * G))

    rng = np.random.default_rng(seed + 1)
    targets = {"x": x64, **W64}
    user: dict[str, np.ndarray] = {}
    for tensor in GRAD_NAMES:
        row = GradientRow(tensor, reference[tensor].shape)
        report.rows.append(row)
        arr, row.problem = gradient_array(grads.get(tensor), row.expected_shape)
        if arr is None:
            continue
        if not np.all(np.isfinite(arr)):
            row.problem = f"NaN/inf in {arr.size - int(np.count_nonzero(np.isfinite(arr)))} of {arr.size}"
            continue
        try:
            row.numerical = _compare(tensor, targets[tensor], arr, loss, eps, atol, rtol, False, 1, rng)
        except Exception as exc:
            report.error, report.forward_wrong = describe_exception(f"{name}'s forward", exc), True
            return report
        row.analytical = _against(tensor, arr, reference[tensor], exact_atol, rtol)
        user[tensor] = arr
    # Finite differences of the forward are noise when they miss npattn's gradient, which the user's equals.
    suspects = [
        r.name
        for r in report.rows
        if r.numerical
        and not r.numerical.passed
        and _against(r.name, user[r.name], reference[r.name], *FLOAT32_TOLERANCE).passed
    ]
    try:
        noisy = [
            f"d{n}" for n in suspects
            if not _compare(n, targets[n], reference[n], loss, eps, atol, rtol, False, 1, rng).passed
        ]
    except Exception as exc:
        report.error, report.forward_wrong = describe_exception(f"{name}'s forward", exc), True
        return report
    report.precision_note = _precision_note(out, expected_out, dtypes[0], noisy)
    tolerance = (exact_atol, rtol)
    if report.precision_note:  # npattn's gradient judges, to the precision the forward computes in
        tolerance = (max(exact_atol, FLOAT32_TOLERANCE[0]), max(rtol, FLOAT32_TOLERANCE[1]))
        for row in report.rows:
            row.judged_by_differences = False
            if row.name in user:
                row.analytical = _against(row.name, user[row.name], reference[row.name], *tolerance)
    report.diagnosis = diagnose_backward(x64, W64, G, grads, **settings, atol=tolerance[0], rtol=tolerance[1])
    if report.passed:  # right once: again after a forward on a second input (state kept from the first call)
        try:
            report.error = second_backward_problem(
                backward, x64, W64, G, user, settings, tolerance, name=name, seed=seed
            )
        except ConfigError as exc:
            report.error = f"on a second input: {exc}"
        except Exception as exc:
            report.error = describe_exception(f"{name}'s backward on a second input", exc)
    return report


def _precision_note(out: np.ndarray, expected: np.ndarray, dtype: np.dtype, noisy: list[str]) -> str:
    """Why finite differences of the user's forward cannot judge its backward ("" when they can).

    They cannot when the forward returns less than float64 (its finite differences with eps = 1e-6
    are rounding noise), or when it returns npattn's output and its finite differences miss npattn's
    gradient where the user's gradient equals npattn's (``noisy``: the forward computes in lower
    precision inside, which its output shows: it differs from npattn's by more than float64
    rounding). A float64 forward whose output is npattn's to float64 precision is judged by its
    finite differences.
    """
    judge = (
        "so npattn's analytical gradient (float64) is the judge of your backward here, to float32's precision "
        f"(rtol={FLOAT32_TOLERANCE[1]:g} of each gradient's magnitude)"
    )
    if dtype.kind == "f" and dtype.itemsize < 8:
        return (
            f"note: your forward returns {dtype}: its finite differences (eps=1e-6) are rounding noise, {judge} "
            "(compute in float64 to have your backward checked against your own forward)"
        )
    error = float(np.max(np.abs(out - expected), initial=0.0))
    # Lower precision inside shows in the output: off by more than float64 rounding, within float32's.
    lower = 1e-10 * largest(expected) < error <= 1e-4 * largest(expected)
    if lower and noisy:
        return (
            f"note: your forward loses precision (float32 or lower inside?): its output equals npattn's, your "
            f"{', '.join(noisy)} equal npattn's gradient, and finite differences of your forward miss it, {judge}"
        )
    return ""


def recover_keep(
    output: np.ndarray, x: np.ndarray, weights: Mapping[str, np.ndarray], p: float, *, num_heads: int | None = None
) -> np.ndarray | None:
    """The causal dropout keep mask (b, [h,] n, n) that makes correct attention give ``output``.

    Each row's kept keys are found by trying every subset of the keys it may see (2^(i+1) for
    row i): exact, and cheap for the book's six tokens. Keys a row may not see count as kept.
    None when no mask reproduces the output (the forward is wrong) or n > 12.
    """
    _, A = attention_reference(x, weights, causal=True, num_heads=num_heads)
    values = np.asarray(x, dtype=np.float64) @ np.asarray(weights["W_value"], dtype=np.float64)
    out = np.asarray(output, dtype=np.float64)
    if num_heads:
        b, n, d = values.shape
        values = values.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)
        out = out.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)
    n = A.shape[-1]
    if n > 12 or out.shape != A.shape[:-1] + values.shape[-1:]:
        return None
    keep = np.ones(A.shape, dtype=bool)
    scale = float(np.max(np.abs(out), initial=0.0))
    for lead in np.ndindex(*A.shape[:-2]):
        for i in range(n):
            subsets = np.array(list(itertools.product((False, True), repeat=i + 1)), dtype=bool)
            predicted = (subsets * A[lead][i, : i + 1] / (1 - p)) @ values[lead][: i + 1]
            error = np.max(np.abs(predicted - out[lead][i]), axis=-1)
            best = int(np.argmin(error))
            if not error[best] <= 1e-8 + 1e-6 * scale:
                return None
            keep[lead][i, : i + 1] = subsets[best]
    return keep
