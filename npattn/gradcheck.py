"""Finite-difference gradient checks: for whole modules and for single stage pairs.

Both checks work in float64 with central differences, on the loss L = sum(output * G) with a
random upstream gradient G (never sum(output): softmax rows sum to one, so the true gradient of
that loss w.r.t. the scores is zero and a broken softmax backward would pass).

A tensor passes when max|numerical - analytical| <= atol + rtol * max|numerical|, judged per
tensor. With eps = 1e-6 in float64 the finite-difference error is about 1e-10 of the gradient's
scale, so the defaults (atol = 1e-8, or the rounding noise ``difference_noise`` when larger;
rtol = 1e-6) reject a gradient scaled by 1.0001 (an error of 1e-4 of the scale) by a factor of
about 100, and pass a correct one with a margin of about 100 or more.

A check that cannot fail is refused (ConfigError) rather than passed: an input with no elements,
rtol >= 1e-4, and an atol so wide that, for the largest gradient compared, a gradient off by
0.01% (x 1.0001) or with its sign flipped would pass (a caller's atol: for any tensor, with its
sign flipped). So is a check whose numerical gradient
cannot be trusted: a forward output holding NaN or inf, and an eps below ``MIN_EPS`` times the
largest magnitude perturbed (at least ``MIN_EPS``). Rounding x + eps in float64 errs by up to
1.1e-16 |x|, an error of 1.1e-16 |x| / eps in the step: at eps = 1e-10 |x| that is about 1e-6 of
the gradient, 100 times below the 1e-4 a check must detect; with a smaller eps the round-off
swamps the gradient (at eps = 1e-30 every difference rounds to zero).

The backward is given a copy of G: a backward that edits its upstream gradient in place after
using it changes nothing the check reads.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npattn import _html
from npattn._checks import as_array, check_bool, check_finite, check_nonnegative_int, check_positive_int, from_tensor
from npattn.errors import ConfigError, DTypeError, GradcheckError
from npattn.nn.layers import check_deterministic
from npattn.nn.module import Module

__all__ = ["DETECTS", "GradcheckReport", "TensorCheck", "gradcheck", "gradcheck_stage"]

DETECTS = 1e-4
"""Every check must be able to fail a gradient off by this relative amount (x 1.0001)."""

DIFFERENCE_NOISE = 10.0
"""How many times the finite differences' rounding noise the default atol allows (``difference_noise``)."""

MIN_EPS = 1e-10
"""The smallest eps, relative to the largest magnitude perturbed (and absolute below magnitude 1)."""


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

    @property
    def passed(self) -> bool:
        return bool(self.max_abs_error <= self.allowed)

    @property
    def margin(self) -> float:
        """allowed / max_abs_error: how many times larger the error could be and still pass."""
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

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

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
        rows.append(f"eps={self.eps:g} atol={self.atol:g} rtol={self.rtol:g}: {'PASSED' if self.passed else 'FAILED'}")
        if self.note and not self.passed:
            rows.append(self.note)
        return "\n".join(rows)

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
        verdict = f"eps={self.eps:g} atol={self.atol:g} rtol={self.rtol:g}: {'PASSED' if self.passed else 'FAILED'}"
        return _html.wrap(_html.table(header, rows, caption="gradient check"), text=verdict)


def _compare(
    name: str,
    target: np.ndarray,
    analytical: np.ndarray,
    loss: Callable[[], float],
    eps: float,
    atol: float,
    rtol: float,
    fast_mode: bool,
    n_directions: int,
    rng: np.random.Generator,
) -> TensorCheck:
    """Central differences of ``loss`` w.r.t. ``target`` (perturbed in place, then restored)."""
    if analytical.shape != target.shape:
        raise GradcheckError(
            f"analytical gradient of {name} has shape {analytical.shape}, expected {target.shape} (the tensor's shape)"
        )
    if fast_mode:
        directions = rng.standard_normal((n_directions, *target.shape))
        directions /= np.sqrt(np.sum(directions**2, axis=tuple(range(1, directions.ndim)), keepdims=True)) + 1e-300
        numerical = np.empty(n_directions)
        for k, v in enumerate(directions):
            original = target.copy()
            target += eps * v
            plus = loss()
            target[...] = original - eps * v
            minus = loss()
            target[...] = original
            numerical[k] = (plus - minus) / (2 * eps)
        analytic = np.array([np.sum(analytical * v) for v in directions])
    else:
        numerical = np.empty(target.shape)
        for index in np.ndindex(*target.shape):
            original = target[index]
            target[index] = original + eps
            plus = loss()
            target[index] = original - eps
            minus = loss()
            target[index] = original
            numerical[index] = (plus - minus) / (2 * eps)
        analytic = analytical.astype(np.float64)
    error = np.abs(numerical - analytic)
    scale = float(np.max(np.abs(numerical))) if numerical.size else 0.0
    allowed = atol + rtol * scale
    if error.size == 0:
        return TensorCheck(name, target.shape, 0.0, 0.0, allowed, (), 0.0, 0.0, fast_mode, scale)
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    return TensorCheck(
        name=name,
        shape=target.shape,
        max_abs_error=float(error[worst]),
        max_rel_error=max_relative_error(error, numerical),
        allowed=allowed,
        worst_index=tuple(int(i) for i in worst),
        numerical=float(numerical[worst]),
        analytical=float(analytic[worst]),
        directional=fast_mode,
        scale=scale,
    )


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


def difference_noise(out: np.ndarray, G: np.ndarray, eps: float) -> float:
    """The rounding noise of a central difference of L = sum(out * G): ``DIFFERENCE_NOISE`` times
    float64's epsilon (2.2e-16) times sum|out * G|, over eps. Part of gradcheck's default atol (a
    large output next to a small one makes the small tensor's differences that noisy)."""
    return DIFFERENCE_NOISE * float(np.finfo(np.float64).eps) * float(np.sum(np.abs(out * G))) / eps


def _precision_hint(out: Any) -> str:
    """Why a correct backward may fail here: a forward output in float32 (or lower), or float64
    values that are all float32 numbers (computed in float32 inside); "" otherwise."""
    arr = np.asarray(out)
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 8:
        inside = f"returns {arr.dtype}"
    elif arr.dtype == np.float64 and np.any(arr != np.round(arr)) and np.array_equal(arr, arr.astype(np.float32)):
        inside = "returns float64 values that are all float32 numbers (float32 inside?)"
    else:
        return ""
    return (
        f"note: the forward {inside}: finite differences of float32 are rounding noise, so a correct "
        "backward fails here; gradcheck needs the forward to compute in float64"
    )


def _check_settings(eps: float, atol: float, rtol: float, n_directions: int, seed: int, **flags: bool) -> None:
    """Refuse settings under which a check could not fail (or could not pass)."""
    if not check_finite(eps, "eps") > 0:
        raise ConfigError(f"eps must be > 0, got {eps}")
    if check_finite(atol, "atol") < 0 or check_finite(rtol, "rtol") < 0:
        raise ConfigError(f"atol and rtol must be >= 0, got atol={atol}, rtol={rtol}")
    if rtol >= DETECTS:
        raise ConfigError(
            f"rtol must be below {DETECTS:g}, got {rtol:g}: with it a gradient off by 0.01% (x 1.0001) would pass"
        )
    check_positive_int(n_directions, "n_directions")
    check_nonnegative_int(seed, "seed")
    for name, value in flags.items():
        check_bool(value, name)


def _check_eps(eps: float, perturbed: Sequence[np.ndarray]) -> None:
    """Refuse an eps too small for float64 at the magnitudes it perturbs (see the module docstring)."""
    largest = max((float(np.max(np.abs(a), initial=0.0)) for a in perturbed), default=0.0)
    smallest = MIN_EPS * max(1.0, largest)
    if eps < smallest:
        raise ConfigError(
            f"eps={eps:g} is too small for float64 at these magnitudes (the largest is {largest:.3g}): rounding "
            f"x + eps errs by up to 1.1e-16 |x|, which swamps the numerical gradient; use eps >= {smallest:.2g} "
            f"({MIN_EPS:g} times the largest magnitude, at least {MIN_EPS:g})"
        )


def _check_output(out: Any, who: str) -> None:
    """Refuse a forward output holding NaN or inf: no numerical gradient can be taken through it."""
    arr = np.asarray(out)
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        raise ConfigError(
            f"{who}: the forward output is not finite ({bad} of {arr.size} entries are NaN or inf), "
            "so no gradient can be compared; check the forward first"
        )


def _check_can_fail(report: GradcheckReport) -> None:
    """Refuse a report whose checks could not have failed: for the largest gradient compared, atol
    and rtol would let a gradient off by 0.01% (x 1.0001), or one with its sign flipped, pass."""
    if not report.checks:
        raise ConfigError(
            "gradcheck: nothing was compared (every parameter is frozen and the input is not checked), "
            "so no wrong gradient could fail the check"
        )
    largest = max((c.scale for c in report.checks), default=0.0)
    # All gradients zero: the check still fails any analytical gradient above atol.
    if largest > 0.0 and report.atol + report.rtol * largest >= DETECTS * largest:
        raise ConfigError(
            f"gradcheck: atol={report.atol:g} is too wide for these gradients (the largest is {largest:.3g}): "
            f"a gradient off by 0.01% (x 1.0001) or with its sign flipped would pass; "
            f"use atol < {(DETECTS - report.rtol) * largest:.2g}"
        )
    # A caller's atol, per tensor: each tensor whose gradient is above the default atol must fail
    # with its sign flipped (an error of twice its scale).
    for c in report.checks if report.user_atol else ():
        if c.scale > 1e-8 and c.allowed >= 2 * c.scale:
            raise ConfigError(
                f"gradcheck: atol={report.atol:g} is too wide for {c.name} (its gradient's largest magnitude "
                f"is {c.scale:.3g}): its gradient with the sign flipped would pass; "
                f"use atol < {(2 - report.rtol) * c.scale:.2g}"
            )


def _new_report(out: Any, G: np.ndarray, eps: float, atol: float | None, rtol: float) -> GradcheckReport:
    """The report, with the default atol (None): 1e-8 or, when larger, ``difference_noise``."""
    user_atol = atol is not None
    if atol is None:
        atol = max(1e-8, difference_noise(np.asarray(out, dtype=np.float64), G, eps))
    return GradcheckReport(eps=eps, atol=atol, rtol=rtol, note=_precision_hint(out), user_atol=user_atol)


def _finish(report: GradcheckReport, raise_exception: bool) -> GradcheckReport:
    _check_can_fail(report)
    if raise_exception and not report.passed:
        c = report.failures[0]
        where = f"direction {c.worst_index[0]}" if c.directional else f"index {c.worst_index}"
        raise GradcheckError(
            f"gradient of {c.name} is wrong at {where}: numerical {c.numerical:.10g}, analytical {c.analytical:.10g} "
            f"(max abs error {c.max_abs_error:.3e} > allowed {c.allowed:.3e})\n{report}"
        )
    return report


def gradcheck(
    module: Module,
    x: Any,
    *,
    eps: float = 1e-6,
    atol: float | None = None,
    rtol: float = 1e-6,
    seed: int = 0,
    raise_exception: bool = True,
    fast_mode: bool = False,
    n_directions: int = 4,
    check_input: bool = True,
) -> GradcheckReport:
    """Compare ``module.backward`` with central differences for every parameter and for ``x``.

    Works on a float64 deep copy of ``module`` (the original is untouched). L = sum(module(x) * G)
    with G drawn from ``seed``. ``fast_mode=True`` checks ``n_directions`` random directional
    derivatives per tensor instead of every element (cheap for large tensors; the name is
    ``torch.autograd.gradcheck``'s). Integer token ids (``GPTModel``'s input) are passed
    unchanged with ``check_input=False``: only the parameters are checked. Keep the module in eval
    mode, or its dropout masks fixed (``Dropout.fixed_keep``), so that forward is deterministic.

    Returns:
        GradcheckReport, truthy when every tensor passed.
    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True (names the tensor, the
            index, the numerical and the analytical value).
        ConfigError: the module has no parameters or no backward, or a random forward (a Dropout
            with p > 0 in training mode without ``fixed_keep``); ``x`` has no elements or holds
            NaN or inf; the forward output holds NaN or inf; eps <= 0 or below ``MIN_EPS`` times the
            largest magnitude perturbed; atol or rtol < 0, rtol >= 1e-4, n_directions < 1, a negative seed, a flag
            that is not a bool; an atol so wide, or gradients so small, that the check could not
            fail (see the module docstring).
        DTypeError: ``x`` is not floating point (integers are refused unless ``check_input=False``).
    """
    if not isinstance(module, Module):
        raise ConfigError(f"gradcheck expects an npattn.Module, got {type(module).__name__}")
    if next(module.parameters(), None) is None:
        raise ConfigError(f"gradcheck: {type(module).__name__} has no parameters to check")
    check_deterministic(module, "gradcheck")
    _check_settings(
        eps, 0.0 if atol is None else atol, rtol, n_directions, seed,
        raise_exception=raise_exception, fast_mode=fast_mode, check_input=check_input,
    )  # fmt: skip
    x = from_tensor(x)  # a torch tensor (even one that requires grad) as its values
    x_arr = as_array(x, "x")  # rejects non-numeric data with a clear message
    kind = np.asarray(x).dtype.kind
    ids = kind in "iu" and not check_input  # token ids: passed unchanged, no gradient of their own
    if kind != "f" and not ids:
        hint = " (integer token ids: pass check_input=False to check the parameters)" if kind in "iu" else ""
        raise DTypeError(f"gradcheck needs a floating-point input x, got dtype {np.asarray(x).dtype}{hint}")
    if x_arr.size == 0:
        raise ConfigError(
            f"gradcheck needs an input x with at least one element, got shape {x_arr.shape}: "
            "with nothing to differentiate, no wrong gradient could fail the check"
        )
    if not np.all(np.isfinite(x_arr)):
        raise ConfigError("gradcheck needs a finite input x: it contains NaN or inf, so no gradient can be compared")
    model = copy.deepcopy(module).to(np.float64)
    x64 = np.array(x) if ids else np.array(x_arr, dtype=np.float64)
    rng = np.random.default_rng(seed)

    _check_eps(eps, [p.data for p in model.parameters()] + ([x64] if check_input else []))
    model.zero_grad()
    out = np.asarray(model(x64))
    _check_output(out, "gradcheck")
    G = rng.standard_normal(out.shape)
    try:
        dx = model.backward(G.copy())  # a copy: a backward that edits its grad_output must not change G
    except NotImplementedError as exc:
        raise ConfigError(f"gradcheck needs a module with a backward: {exc}") from None

    def loss() -> float:
        return float(np.sum(np.asarray(model(x64)) * G))

    report = _new_report(out, G, eps, atol, rtol)
    atol = report.atol
    for name, param in model.named_parameters():
        if param.grad is None:  # frozen: no gradient to check
            continue
        analytical = param.grad.copy()
        check = _compare(name, param.data, analytical, loss, eps, atol, rtol, fast_mode, n_directions, rng)
        report.checks.append(check)
    if check_input:
        report.checks.append(_compare("x", x64, np.asarray(dx), loss, eps, atol, rtol, fast_mode, n_directions, rng))
    return _finish(report, raise_exception)


def gradcheck_stage(
    forward: Callable[..., tuple[np.ndarray, Any]],
    backward: Callable[[np.ndarray, Any], Sequence[np.ndarray]],
    inputs: Sequence[Any],
    *,
    kwargs: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    eps: float = 1e-6,
    atol: float | None = None,
    rtol: float = 1e-6,
    seed: int = 0,
    raise_exception: bool = True,
    fast_mode: bool = False,
    n_directions: int = 4,
) -> GradcheckReport:
    """Check one forward/backward pair of ``npattn.functional`` in isolation.

    ``forward(*inputs, **kwargs) -> (out, cache)`` and ``backward(G, cache)`` returning one
    gradient per input (``kwargs`` holds what is not differentiated: a mask, a scale, a
    dropout mask). Inputs are copied to float64.

    Example::

        gradcheck_stage(F.scores_forward, F.scores_backward, [queries, keys], names=["queries", "keys"])

    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True; ``forward`` did not return
            ``(out, cache)`` or ``backward`` not one gradient per input.
        ConfigError: ``forward``/``backward`` not callable; ``inputs`` not a non-empty list or
            tuple; ``kwargs`` not a dict; an input or an output with no elements; a forward output
            holding NaN or inf; the settings ``gradcheck`` refuses.
    """
    _check_settings(
        eps, 0.0 if atol is None else atol, rtol, n_directions, seed,
        raise_exception=raise_exception, fast_mode=fast_mode,
    )  # fmt: skip
    for role, fn in (("forward", forward), ("backward", backward)):
        if not callable(fn):
            raise ConfigError(f"gradcheck_stage: {role} must be a function, got {type(fn).__name__}")
    if not isinstance(inputs, (list, tuple)) or not inputs:
        what = f"{len(inputs)} inputs" if isinstance(inputs, (list, tuple)) else type(inputs).__name__
        raise ConfigError(f"gradcheck_stage: inputs must be a non-empty list or tuple of arrays, got {what}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError(
            f"gradcheck_stage: kwargs must be a dict of forward's keyword arguments (or None), "
            f"got {type(kwargs).__name__}"
        )
    kwargs = dict(kwargs or {})
    if not all(isinstance(k, str) for k in kwargs):
        raise ConfigError(f"gradcheck_stage: kwargs' keys must be argument names (str), got {list(kwargs)!r}")
    arrays = [np.array(as_array(a, f"inputs[{i}]"), dtype=np.float64) for i, a in enumerate(inputs)]
    names = list(names) if names is not None else [f"input{i}" for i in range(len(arrays))]
    if len(names) != len(arrays):
        raise ConfigError(f"gradcheck_stage: {len(names)} names for {len(arrays)} inputs")
    empty = [f"{name} {a.shape}" for name, a in zip(names, arrays) if a.size == 0]
    if empty:
        raise ConfigError(
            f"gradcheck_stage needs inputs with at least one element, got {', '.join(empty)}: "
            "with nothing to differentiate, no wrong gradient could fail the check"
        )
    nonfinite = [name for name, a in zip(names, arrays) if not np.all(np.isfinite(a))]
    if nonfinite:
        raise ConfigError(
            f"gradcheck_stage needs finite inputs: {', '.join(nonfinite)} holds NaN or inf, "
            "so no gradient can be compared"
        )
    _check_eps(eps, arrays)
    rng = np.random.default_rng(seed)
    result = forward(*arrays, **kwargs)
    if not isinstance(result, tuple) or len(result) != 2:
        raise GradcheckError(f"gradcheck_stage: forward must return (out, cache), got {type(result).__name__}")
    out, cache = result
    if np.size(out) == 0:
        raise ConfigError(
            f"gradcheck_stage: forward returned an output with no elements (shape {np.shape(out)}): "
            "L = sum(out * G) is always 0, so no wrong gradient could fail the check"
        )
    _check_output(out, "gradcheck_stage")
    G = rng.standard_normal(np.shape(out))
    grads = backward(G.copy(), cache)  # a copy: a backward that edits its d_out must not change G
    if not isinstance(grads, (list, tuple)) or len(grads) != len(arrays):
        got = f"{len(grads)} gradients" if isinstance(grads, (list, tuple)) else type(grads).__name__
        raise GradcheckError(f"backward returned {got} for {len(arrays)} inputs (expected one gradient per input)")

    def loss() -> float:
        return float(np.sum(forward(*arrays, **kwargs)[0] * G))

    report = _new_report(out, G, eps, atol, rtol)
    atol = report.atol
    for name, target, grad in zip(names, arrays, grads):
        report.checks.append(
            _compare(name, target, np.asarray(grad), loss, eps, atol, rtol, fast_mode, n_directions, rng)
        )
    return _finish(report, raise_exception)
