"""The report of ``npattn check FILE.py:NAME`` (``npattn.debug.usercode``): the output, the shape
check, the single-token check, the diagnosis and, with a backward, the backward checks; one
verdict over every section."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from npattn import _html
from npattn.book import BOOK_TOKENS
from npattn.debug.backcheck import BackwardCheck, describe_exception
from npattn.debug.backward import attention_reference
from npattn.debug.diagnose import Diagnosis, within_float16_noise
from npattn.debug.predict import ShapeCheck
from npattn.debug.rows import RowCheck
from npattn.debug.tolerance import matches
from npattn.debug.weights import returned_array

__all__ = ["CheckReport", "second_input_problem"]


def second_input_problem(
    run: Callable[[np.ndarray], Any], name: str, x: np.ndarray, W: Mapping[str, Any], **settings: Any
) -> str:
    """Run the user's attention (``run``: the same instance or function) on a second input of x's
    shape; "" when its output is right there too, else what is wrong (a forward right on its first
    call only keeps something from it: a cached output, attention weights). ``settings``: causal,
    num_heads."""
    x_second = np.asarray(x, np.float64) + 0.5 * np.random.default_rng(7).standard_normal(np.shape(x))
    W64 = {n: np.asarray(w, np.float64) for n, w in W.items()}
    expected, _ = attention_reference(x_second, W64, **settings)
    try:
        output = returned_array(run(x_second.astype(np.asarray(x).dtype)), name)
    except Exception as exc:
        return f"second input: {describe_exception(name, exc)}"
    if matches(output, expected):
        return ""
    Ws = [W64[n] for n in ("W_query", "W_key", "W_value")]
    if within_float16_noise(x_second, Ws, None, output, expected, causal=settings.get("causal", False),
                            num_heads=settings.get("num_heads") or 1) is not None:  # fmt: skip
        return ""  # a float16 output within float16's own error: not judged, and nothing cached shows
    return (
        f"second input: FAILED: {name} is right for the first input but wrong for a second input of the same "
        "shape (it reuses something from the first call: a cached output, attention weights, ...)"
    )


@dataclass
class CheckReport:
    """The checks of ``npattn check``; truthy when the output is correct and, when the user's code
    has a backward, every gradient is right (``backward``; ``dropout``: the backward with dropout
    of a causal class, ``dropout_note`` when that was not checked)."""

    name: str
    kind: str
    output: np.ndarray
    shape_check: ShapeCheck
    row_check: RowCheck | None
    row_check_skipped: str
    diagnosis: Diagnosis
    causal: bool = False
    built_as: str = ""
    backward: BackwardCheck | None = None
    dropout: BackwardCheck | None = None
    dropout_note: str = ""
    num_heads: int | None = None
    note: str = ""  # what was chosen or changed (a file with NAME and a pair; an out_proj set to the identity)
    second: CheckReport | None = None  # the same checks at a second shape (npattn check's defaults)
    second_error: str = ""  # what the user's code raised, or returned that could not be read, at that shape
    second_shape: str = ""  # "n=5, d_in=4, d_out=3", or "batch=2, n=5, ..." for self-attention on a batch
    second_batched: bool = False  # self-attention ran on a batch at the second shape
    second_note: str = ""  # why it did not (the code takes one sequence only)
    stale: str = ""  # the forward is wrong on a second input of the same shape (``second_input_problem``)

    @property
    def passed(self) -> bool:
        own = self.forward_right and all(c is None or c.passed for c in (self.backward, self.dropout))
        return own and self.second_passed

    @property
    def not_judged(self) -> bool:
        """Not passed only because a float16 output cannot be judged (``Diagnosis.not_judged``), at the
        book's shape or the second shape; every other check passed."""
        if self.passed or self.second_error:
            return False
        second = self.second
        reports = (self,) if second is None else (self, second)
        settled = all(r._own_passed() or r._own_not_judged() for r in reports)
        return settled and any(r._own_not_judged() for r in reports)

    def _own_not_judged(self) -> bool:
        checks = (self.backward, self.dropout)
        return bool(self.diagnosis.not_judged) and not self.stale and all(c is None or c.passed for c in checks)

    @property
    def second_passed(self) -> bool:
        """Every check passed at the second shape too (True when it was not run)."""
        return not self.second_error and (self.second is None or self.second.passed)

    def _second_lines(self) -> list[str]:
        if not self.second_shape:
            return []
        head = f"another shape: {self.second_shape} (random x and weights)"
        if self.not_judged and self.second is not None and self.second._own_not_judged():
            return ["", f"{head}: NOT JUDGED (a float16 output, within float16 arithmetic's own error here)"]
        if self.second_passed:
            assert self.second is not None
            checked = "the forward and the backward" if self.second.backward is not None else "the forward"
            note = ["  " + self.second_note] if self.second_note else []
            return ["", f"{head}: PASSED ({checked} right here too)", *note]
        if not self._own_passed() and not self._own_not_judged():  # wrong at the book's shape already: see above
            return ["", f"{head}: FAILED too"]
        hint = " (the book's shape was not judged: a float16 output)" if self._own_not_judged() else (
            " at this shape only (the book's shape passed): does the code hard-code a size (sqrt(2) for "
            "d_out=2, six tokens, d_in=3), or fail when it runs a second time?"
        )
        if self.second_batched and not self._own_not_judged():
            hint = (
                " on a batch (one sequence at the book's shape passed): is an axis counted from the front "
                "(softmax dim=1, .T) where a batch adds one? Count from the end (dim=-1, transpose(-2, -1)); "
                "or does the code hard-code a size?"
            )
        if self.second_error:
            return ["", f"{head}: FAILED{hint}", f"  {self.second_error}"]
        assert self.second is not None
        lines = ["", f"{head}: FAILED{hint}"]
        if not self.second.diagnosis.correct:
            lines += ["  " + line for line in str(self.second.diagnosis).splitlines()]
        for check in (self.second.backward,):
            if check is not None and not check.passed:
                lines.append("  " + check.verdict())
        return lines

    def _own_passed(self) -> bool:
        return self.forward_right and all(c is None or c.passed for c in (self.backward, self.dropout))

    @property
    def forward_right(self) -> bool:
        """The output is correct (section 3), and no backward check found the forward wrong (it raised, or
        with dropout no keep mask explains its output: section 5)."""
        checks = (self.backward, self.dropout)
        wrong = any(c is not None and c.forward_wrong for c in checks)
        return self.diagnosis.correct and not self.stale and not wrong

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        what = {
            "class": "a class",
            "instance": "an instance",
            "function": "a function of (x, W_query, W_key, W_value)",
            "pair": f"{self.name}_forward and {self.name}_backward",
        }
        if self.causal:
            built = f", built as {self.built_as}" if self.built_as else ""
            as_what = f"multi-head causal attention ({self.num_heads} heads)" if self.num_heads else "causal attention"
            d_out = self.output.shape[-1] if self.num_heads else 2
            lines = [
                f"checking {self.name} ({what[self.kind]}{built}) as {as_what} on the book's batch "
                f"(2, 6, 3) with the seed-123 weights (d_out={d_out})",
                "",
                "output" + (" (first sequence of the batch):" if self.output.ndim == 3 else ":"),
            ]
        else:
            lines = [
                f"checking {self.name} ({what[self.kind]}) on the book's input (6 tokens, d_in=3) "
                "with the seed-123 weights (d_out=2)",
                "",
                "output:",
            ]
        shown = self.output[0] if self.output.ndim == 3 else self.output
        rows = np.atleast_2d(shown) if shown.ndim else np.array([[shown]])
        for i, row in enumerate(rows):
            token = f"{BOOK_TOKENS[i]:<8} " if i < len(BOOK_TOKENS) and rows.shape[0] == len(BOOK_TOKENS) else ""
            lines.append("  " + token + "[" + ", ".join(f"{v: .4f}" for v in np.ravel(row)) + "]")
        if self.note:
            lines[1:1] = [self.note]
        lines += ["", "1. shapes: predicted vs actual", str(self.shape_check), ""]
        lines.append("2. " + (str(self.row_check) if self.row_check is not None else self.row_check_skipped))
        lines += ["", "3. " + str(self.diagnosis)] + (["", self.stale] if self.stale else [])
        if self.backward is not None:
            lines += ["", str(self.backward)]
        if self.dropout is not None:
            lines += ["", str(self.dropout)]
        elif self.dropout_note:
            lines += ["", self.dropout_note]
        lines += self._second_lines()
        lines += ["", f"{self.name}: {self.verdict()}"]
        return "\n".join(lines)

    __repr__ = __str__

    def verdict(self) -> str:
        """One line: PASSED, FAILED or NOT JUDGED (a float16 output), and which of forward and backward
        is right (every section counts)."""
        if self.not_judged:
            backward = "no backward to check" if self.backward is None else "the backward is right"
            if "dropout: not checked" in self.dropout_note:
                backward += "; its dropout not checked: see section 5"
            return (
                f"NOT JUDGED: the forward returned float16, which errs here by more than the check can tell from "
                f"a mistake ({backward}); compute and return float32 or float64 to have it judged"
            )
        if self._own_passed() and not self.second_passed:
            return f"FAILED: right at the book's shape, wrong at {self.second_shape} (see 'another shape')"
        sections = ((4, self.backward), (5, self.dropout))
        where = ["second input"] if self.stale else []
        where += [f"section {i}" for i, c in sections if c is not None and c.forward_wrong]
        if (self.diagnosis.correct or self.diagnosis.not_judged) and not self.forward_right and where:
            forward = f"the forward is wrong ({', '.join(where)}: see there)"
        else:
            forward = "the forward is right" if self.diagnosis.correct else "the forward is wrong"
        unchecked = "; its dropout not checked: see section 5" if "dropout: not checked" in self.dropout_note else ""
        if self.backward is None:
            return f"{'PASSED' if self.passed else 'FAILED'}: {forward} (no backward to check{unchecked})"
        if self.passed:
            return f"PASSED: the forward and the backward are right{unchecked}"
        checks = [c for c in (self.backward, self.dropout) if c is not None]
        if any((c.error and not c.forward_wrong) or (c.rows and not c.consistent) for c in checks):
            backward = "the backward is wrong"
        elif not any(c.rows for c in checks):
            backward = "the backward was not checked"
        elif all(c.passed for c in checks if c.rows):
            backward = "the backward is right"
        else:
            backward = "the backward is the derivative of your forward"
        return f"FAILED: {forward}, {backward}"

    def _repr_html_(self) -> str:
        rows = [[r.name, str(r.expected), str(r.actual), "ok" if r.ok else "MISMATCH"] for r in self.shape_check.rows]
        parts = [_html.table(["stage", "predicted", "actual", ""], rows, caption=f"npattn check {self.name}: shapes")]
        parts += [c._repr_html_() for c in (self.backward, self.dropout) if c is not None]
        return _html.wrap(*parts, text=str(self))
