"""The gradient check's report (one TensorCheck per tensor) and its verdict: the refusal of a
check that could not fail, and the GradcheckError of a failed one."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npattn import _html
from npattn._scalars import bound
from npattn.errors import ConfigError, GradcheckError

__all__ = ["DETECTS", "GradcheckReport", "TensorCheck", "max_relative_error"]

DETECTS = 1e-4
"""Every check must be able to fail a gradient off by this relative amount (x 1.0001)."""

@dataclass
class TensorCheck:
    """The comparison for one tensor (a parameter, the input, or a stage input)."""

    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    allowed: float
    worst_index: tuple[int, ...]
    numerical: float
    analytical: float
    directional: bool = False
    scale: float = 0.0  # max |numerical|: what the error is measured against
    step: float = 0.0  # the finite-difference step used (eps, or larger for a gradient below its noise)
    resolved: bool = True  # False: the gradient is below the differences' noise at every step tried
    element_allowed: float | None = None  # set when an element is off by more than 0.01% of itself (+ atol):
    element_error: float | None = None  # its allowance and its error (worst_index, numerical, analytical: it)
    noise_floor: float | None = None  # failed at eps: the error the differences themselves may carry
    truncation: str = ""  # failed at eps by the differences' truncation error (``compare._truncation``)
    settled: str = ""  # failed at eps, and at a smaller step the differences settle off the backward: it is wrong

    @property
    def within_noise(self) -> bool:
        """Failed with an error no larger than the differences' own noise: the check cannot tell."""
        error = self.element_error if self.element_allowed is not None else self.max_abs_error
        if self.settled:  # the differences told, at a smaller step
            return False
        return not self.passed and self.noise_floor is not None and error is not None and error <= self.noise_floor

    @property
    def passed(self) -> bool:
        return bool(self.max_abs_error <= self.allowed) and self.element_allowed is None

    @property
    def margin(self) -> float:
        """allowed / max_abs_error: how many times larger the error could be and still pass (for
        an element off by more than 0.01% of itself, its own allowance over its error)."""
        if self.element_allowed is not None and self.element_error:
            return self.element_allowed / self.element_error
        return float("inf") if self.max_abs_error == 0 else self.allowed / self.max_abs_error


@dataclass
class GradcheckReport:
    """All tensors' comparisons. Truthy when every tensor passed; prints as a table."""

    checks: list[TensorCheck] = field(default_factory=list)
    eps: float = 1e-6
    atol: float = 1e-8
    rtol: float = 1e-6
    note: str = ""  # why a correct backward may fail (a forward in float32), printed with the verdict
    user_atol: bool = True  # atol given by the caller: every tensor must be able to fail under it
    noise: float | None = None  # the differences' rounding noise at eps, with the default atol
    copied: str = ""  # gradcheck: what the float64 copy leaves unchecked (a module in another dtype)
    rounding: float = 0.0  # the differences' rounding noise at eps, whatever the atol
    reason: str = ""  # why the failed tensors failed, when the check can tell (a backward ignoring its cache)
    precision: str = ""  # the part of ``note`` that says the forward computes in float32
    unchecked: str = ""  # gradcheck_stage: the inputs not checked ("input0: integer ids, not checked")
    accumulates: str = ""  # gradcheck: why a second backward did not add the same gradient again ("" if it did)
    eps_floor: float = 0.0  # the smallest eps float64 allows at the perturbed magnitudes (``settings._check_eps``)

    @property
    def passed(self) -> bool:
        return not self.accumulates and all(c.passed for c in self.checks)

    def __bool__(self) -> bool:
        return self.passed

    def __getitem__(self, name: str) -> TensorCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def failures(self) -> list[TensorCheck]:
        return [c for c in self.checks if not c.passed]

    def __str__(self) -> str:
        header = "tensor           shape         max abs err  max rel err    allowed    margin  result"
        rows = [header, "-" * len(header)]
        for c in self.checks:
            shape = "x".join(map(str, c.shape)) + (" (dir)" if c.directional else "")
            margin = "inf" if c.margin == float("inf") else f"{c.margin:.3g}x"
            rows.append(
                f"{c.name:<16} {shape:<12} {c.max_abs_error:>12.3e} {c.max_rel_error:>12.3e} "
                f"{c.allowed:>10.2e} {margin:>9}  {'ok' if c.passed else 'FAIL'}"
            )
        rows.append(f"eps={self.eps:g} atol={self.atol:g} rtol={self.rtol:g}: {self.verdict}")
        rows += self.small_gradients()
        if self.copied:
            rows.append(self.copied)
        if self.unchecked:
            rows.append(self.unchecked_note)
        if self.precision and not self.passed:
            rows.append(self.precision)
        if self.reason and not self.passed:
            rows.append(self.reason)
        if self.accumulates:
            rows.append(self.accumulates)
        return "\n".join(rows)

    @property
    def verdict(self) -> str:
        """PASSED or FAILED, with the inputs not checked in parentheses (never a bare PASSED then)."""
        return ("PASSED" if self.passed else "FAILED") + (f" ({self.unchecked})" if self.unchecked else "")

    @property
    def unchecked_note(self) -> str:
        if not self.unchecked:
            return ""
        return (
            f"note: {self.unchecked}: passed to the forward unchanged and unperturbed (it refuses them as "
            "floats, e.g. token ids, or the backward returns no gradient for them)"
        )

    def small_gradients(self) -> list[str]:
        """A line for each tensor whose gradient is too small for the default atol at eps: checked
        at a larger step with an atol of its own, or below the noise at every step tried (then a
        gradient of the right size with the wrong sign, or none at all, would pass: said so)."""
        lines = []
        for c in self.checks:
            if c.element_allowed is not None and c.max_abs_error <= c.allowed:
                lines.append(
                    f"note: {c.name}{list(c.worst_index)} is off by {c.element_error:.3g} (numerical "
                    f"{c.numerical:.6g}, analytical {c.analytical:.6g}): more than atol + 0.01% of its own value "
                    f"({c.element_allowed:.2g}), though within the tensor's allowance"
                )
            if not c.resolved:
                lines.append(
                    f"note: {c.name}'s numerical gradient (largest {c.scale:.3g}) is below the finite differences' "
                    f"noise at every step up to {self.eps * 1e4:g}: only |analytical - numerical| <= {c.allowed:.2g} "
                    "is checked, "
                    f"so a missing or wrong-signed gradient may pass; check {c.name} where the loss is not "
                    "dominated by larger outputs"
                )
            elif c.step > self.eps:
                lines.append(
                    f"note: {c.name}'s gradient (largest {c.scale:.3g}) is too small for the rounding noise at eps "
                    f"to judge, so it is checked at step {c.step:g} (allowed {c.allowed:.2g})"
                )
            if c.resolved and not self.user_atol and 0 < DETECTS * c.scale <= c.allowed:
                lines.append(
                    f"note: {c.name} is judged to {100 * c.allowed / c.scale:.2g}% of its largest gradient at best "
                    f"(allowed {c.allowed:.2g} against {c.scale:.3g}, the differences' noise): a smaller error would "
                    f"pass; check {c.name} where the loss is not dominated by larger outputs"
                )
        return lines

    __repr__ = __str__

    def _repr_html_(self) -> str:
        """The table as HTML (Jupyter)."""
        rows = [
            [c.name, "x".join(map(str, c.shape)) + (" (dir)" if c.directional else ""), f"{c.max_abs_error:.3e}",
             f"{c.max_rel_error:.3e}", f"{c.allowed:.2e}", "inf" if c.margin == float("inf") else f"{c.margin:.3g}x",
             "ok" if c.passed else "FAIL"]
            for c in self.checks
        ]
        header = ["tensor", "shape", "max abs err", "max rel err", "allowed", "margin", "result"]
        verdict = f"eps={self.eps:g} atol={self.atol:g} rtol={self.rtol:g}: {self.verdict}"
        return _html.wrap(_html.table(header, rows, caption="gradient check"), text=verdict)


def max_relative_error(error: np.ndarray, reference: np.ndarray) -> float:
    """max |error| / |reference| over the entries with an error; inf where the reference is exactly 0
    (printed as "inf"; verdicts use the absolute error and ``allowed``, never this number)."""
    wrong = error > 0
    if not np.any(wrong):
        return 0.0
    ref = np.abs(reference[wrong])
    if np.any(ref == 0):
        return float("inf")
    return float(np.max(error[wrong] / ref))


def _check_can_fail(report: GradcheckReport) -> None:
    """Refuse a report whose checks could not have failed: for the largest gradient compared, atol
    and rtol would let a gradient off by 0.01% (x 1.0001), or one with its sign flipped, pass."""
    if not report.checks:
        raise ConfigError(
            "gradcheck: nothing was compared (every parameter is frozen and the input is not checked), "
            "so no wrong gradient could fail the check"
        )
    largest = max((c.scale for c in report.checks), default=0.0)
    # All gradients zero: the check still fails any analytical gradient above atol. The default atol
    # is not refused: each tensor below it already has the tolerance its differences can tell.
    if report.user_atol and largest > 0.0 and report.atol + report.rtol * largest >= DETECTS * largest:
        raise ConfigError(
            f"gradcheck: atol={report.atol:g} is too wide for these gradients (the largest is {largest:.3g}): "
            f"a gradient off by 0.01% (x 1.0001) or with its sign flipped would pass; "
            f"use atol < {bound((DETECTS - report.rtol) * largest, below=True)}"
        )
    # A caller's atol, per tensor: each tensor whose gradient is above the default atol must fail
    # with its sign flipped (an error of twice its scale).
    for c in report.checks if report.user_atol else ():
        if c.scale > 1e-8 and c.allowed >= 2 * c.scale:
            raise ConfigError(
                f"gradcheck: atol={report.atol:g} is too wide for {c.name} (its gradient's largest magnitude "
                f"is {c.scale:.3g}): its gradient with the sign flipped would pass; "
                f"use atol < {bound((2 - report.rtol) * c.scale, below=True)}"
            )


def _check_resolvable(report: GradcheckReport) -> None:
    """Refuse a failure the differences cannot tell from their own noise: when every failed tensor's
    error is within the noise of its central differences, the tolerance, not the backward, failed.
    A forward in float32 (``note``) keeps its GradcheckError and the note that says to fix it."""
    failures = report.failures
    if failures and not report.precision and all(c.within_noise for c in failures):
        c = max(failures, key=lambda c: c.noise_floor or 0.0)
        error = c.element_error if c.element_allowed is not None else c.max_abs_error
        raise ConfigError(
            f"gradcheck: atol={report.atol:g} (rtol={report.rtol:g}) is below what central differences can resolve "
            f"here (~{c.noise_floor:.2g} for {c.name}, whose error {error:.3g} is within it): the check cannot tell "
            f"a correct gradient from one off by that much; raise atol to at least {c.noise_floor:.2g} or raise "
            + ("eps, or leave atol at its default" if report.user_atol else "eps (this atol is the default's)")
        )


def _finish(report: GradcheckReport, raise_exception: bool) -> GradcheckReport:
    """The report, after refusing one that cannot fail or cannot tell (ConfigError: eps too large when
    a failing tensor's error shrinks at eps / 2 and no other's is above its differences' noise; a
    tensor whose error is above that noise and does not shrink fails the backward); raises
    GradcheckError for a failed one with ``raise_exception``."""
    failing = report.failures
    above = [c for c in failing if not c.truncation and not c.within_noise]  # the backward's own errors
    truncated = [c for c in failing if c.truncation]
    if truncated and not above:  # eps too large: said first, before any advice on the noise
        said = truncated[0].truncation
        # truncation error falls as eps**2: any still above what is allowed at the smallest eps float64 allows here?
        if any(c.max_abs_error * (report.eps_floor / report.eps) ** 2 > c.allowed for c in truncated):
            said = said.replace(
                "; use a smaller eps (the default is 1e-6)",
                f"; it would still be too large at {report.eps_floor:.2g}, below which eps is too small for float64 "
                "at the magnitudes perturbed: no single eps can check these inputs in float64 (their magnitudes span "
                "too wide a range: rescale them)",
            )
        raise ConfigError(said)
    _check_can_fail(report)
    _check_resolvable(report)
    if raise_exception and report.accumulates and not report.failures:
        raise GradcheckError(f"{report.accumulates}\n{str(report).removesuffix(chr(10) + report.accumulates)}")
    if raise_exception and not report.passed:
        c = next((c for c in failing if not c.within_noise and not c.truncation), failing[0])  # the backward's first
        where = f"direction {c.worst_index[0]}" if c.directional else f"index {c.worst_index}"
        off = f"max abs error {c.max_abs_error:.3e} > allowed {c.allowed:.3e}"
        if c.element_allowed is not None:
            off = f"error {c.element_error:.3e} > atol + 0.01% of its own value, {c.element_allowed:.3e}"
        if c.settled:
            off += f"; {c.settled}"
        first = f"{report.reason}\n" if report.reason else ""  # said once, first
        table = str(report).removesuffix("\n" + report.reason) if report.reason else str(report)
        raise GradcheckError(
            f"{first}gradient of {c.name} is wrong at {where}: numerical {c.numerical:.10g}, analytical "
            f"{c.analytical:.10g} ({off})\n{table}"
        )
    return report
