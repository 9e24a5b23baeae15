"""Finite-difference gradient checks: for whole modules and for single stage pairs.

Both checks work in float64 with central differences, on the loss L = sum(output * G) with a
random upstream gradient G (never sum(output): softmax rows sum to one, so the true gradient of
that loss w.r.t. the scores is zero and a broken softmax backward would pass).

A tensor passes when max|numerical - analytical| <= atol + rtol * max|numerical|, judged per
tensor. With eps = 1e-6 in float64 the finite-difference error is about 1e-10 of the gradient's
scale, so the defaults (atol = 1e-8, or the rounding noise ``difference_noise`` when larger;
rtol = 1e-6) reject a gradient scaled by 1.0001 (an error of 1e-4 of the scale) by a factor of
about 100, and pass a correct one with a margin of about 100 or more.

With the default atol, a tensor whose gradient would pass missing or with its sign flipped (it is below
atol, or far below the other outputs' rounding noise) gets an atol of its own (``_sharpest``):
ten times the change between the differences at step h and 2h, at least the rounding noise at h,
at h = eps, 100 eps or 10^4 eps; below the noise at every step, the report says so in a note.
Either way (also once a step resolves the sign), a gradient that x 1.0001 would pass at eps is checked
at the step of those three with the smallest atol, stopping at one that fails x 1.0001
(``_sharpest``: at eps alone a 10% error passed behind a saturated softmax); a tensor judged more
coarsely than 0.01% even there is named in a note saying how coarsely.
A backward must add to ``.grad``: a second forward and backward must double every gradient.

A check that cannot fail is refused (ConfigError) rather than passed: an input with no elements,
rtol >= 1e-4, and a caller's atol so wide that, for the largest gradient compared, a gradient
off by 0.01% (x 1.0001) or, for any tensor, one with its sign flipped would pass (the default atol
is never refused: a tensor too small for it gets its own, as above, even when all are that small).
So is a check whose numerical gradient cannot be trusted: a forward output holding NaN or inf,
and an eps below ``MIN_EPS`` times the largest magnitude perturbed (at least ``MIN_EPS``).
Rounding x + eps in float64 errs by up to 1.1e-16 |x|, an error of 1.1e-16 |x| / eps in the
step: at eps = 1e-10 |x| that is about 1e-6 of the gradient, 100 times below the 1e-4 a check
must detect; with a smaller eps the round-off swamps the gradient (at eps = 1e-30 every difference rounds to zero).
A failure the differences cannot tell from their own noise is refused too (ConfigError, naming the
tolerance and the floor): every failed tensor's error within the rounding noise at eps, or ten
times the change between the differences at eps and 2 eps (a caller's atol = 0 on a correct
backward); a failure above that floor is a GradcheckError.

The backward is given a copy of G: a backward that edits its upstream gradient in place after
using it changes nothing the check reads.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn._checks import as_array, from_tensor
from npattn.errors import ConfigError, DTypeError
from npattn.gradcheck.compare import STEPS, _compare
from npattn.gradcheck.gradients import _gradient
from npattn.gradcheck.report import DETECTS, GradcheckReport, TensorCheck, _finish, max_relative_error
from npattn.gradcheck.settings import (
    DIFFERENCE_NOISE,
    MIN_EPS,
    _check_eps,
    _check_output,
    _check_same,
    _check_settings,
    _new_report,
    difference_noise,
)
from npattn.gradcheck.stage import gradcheck_stage
from npattn.nn.layers import check_deterministic
from npattn.nn.module import Module

__all__ = ["DETECTS", "GradcheckReport", "TensorCheck", "gradcheck", "gradcheck_stage"]
__all__ += ["DIFFERENCE_NOISE", "MIN_EPS", "STEPS", "difference_noise", "max_relative_error"]


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
    n_directions: int | None = None,
    check_input: bool = True,
) -> GradcheckReport:
    """Compare ``module.backward`` with central differences for every parameter and for ``x``.

    Works on a float64 deep copy of ``module`` (the original is untouched). L = sum(module(x) * G)
    with G drawn from ``seed``. ``fast_mode=True`` checks ``n_directions`` (default 4) random directional
    derivatives per tensor instead of every element (cheap for large tensors; the name is
    ``torch.autograd.gradcheck``'s). Integer token ids (``GPTModel``'s input) are passed
    unchanged with ``check_input=False``: only the parameters are checked. Keep the module in eval
    mode, or its dropout masks fixed (``Dropout.fixed_keep``), so that forward is deterministic.
    Every forward call gets its own copy of x (a forward may edit its input in place).

    Returns:
        GradcheckReport, truthy when every tensor passed.
    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True (names the tensor, the
            index, the numerical and the analytical value); a ``.grad`` or dx that is not real
            numbers (complex, booleans, strings); the forward returned something other
            than an ndarray of floats (a tuple, None, integers).
        ConfigError: the module has no parameters or no backward, or a random forward (a Dropout
            with p > 0 in training mode without ``fixed_keep``); ``x`` has no elements or holds
            NaN or inf; the forward output holds NaN or inf; eps <= 0 or below ``MIN_EPS`` times the
            largest magnitude perturbed; every failure's error within the differences' own noise
            (the tolerance is below what they can resolve); atol or rtol < 0, rtol >= 1e-4,
            n_directions < 1 or given without fast_mode=True, a negative seed, a flag that is not a
            bool; an atol given so wide, for these gradients, that the check could not fail (see
            the module docstring).
        DTypeError: ``x`` is not floating point (integers are refused unless ``check_input=False``).
    """
    if not isinstance(module, Module):
        raise ConfigError(f"gradcheck expects an npattn.Module, got {type(module).__name__}")
    if next(module.parameters(), None) is None:
        raise ConfigError(f"gradcheck: {type(module).__name__} has no parameters to check")
    check_deterministic(module, "gradcheck")
    n_directions = _check_settings(
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

    eps_floor = _check_eps(eps, [p.data for p in model.parameters()] + ([x64] if check_input else []))
    model.zero_grad()
    # a forward and a backward on another input first (its gradients then zeroed): a backward that
    # keeps state from its first call (a stale cache, memoised gradients) gives that input's gradient
    other = np.roll(x64, 1) if ids else x64 * 0.5 + 0.25
    other_out = model(other.copy())
    try:
        if isinstance(other_out, np.ndarray):  # otherwise refused below, on x's output
            with np.errstate(all="ignore"):  # the other input's gradients are only run, never compared
                model.backward(copy.deepcopy(rng).standard_normal(other_out.shape))  # G's values, when shapes agree
        model.zero_grad()
        first_out = _check_output(model(x64.copy()), "gradcheck")  # a copy for every call: a forward may edit x
        out = _check_output(model(x64.copy()), "gradcheck")
        _check_same(first_out, out, "gradcheck")
        G = rng.standard_normal(out.shape)
        dx = model.backward(G.copy())  # a copy: a backward that edits its grad_output must not change G
    except NotImplementedError as exc:
        raise ConfigError(f"gradcheck needs a module with a backward: {exc}") from None

    def loss() -> float:
        return float(np.sum(_check_output(model(x64.copy()), "gradcheck") * G))

    first = {name: p.grad.copy() for name, p in model.named_parameters() if isinstance(p.grad, np.ndarray)}
    accumulates = _check_accumulates(model, x64, G, first)
    report = _new_report(out, G, eps, atol, rtol)
    report.eps_floor = eps_floor
    report.accumulates = accumulates
    atol, noise = report.atol, report.noise
    dtypes = sorted({str(p.dtype) for p in module.parameters()} - {"float64"})
    if dtypes:
        report.copied = (
            f"note: checked on a float64 copy of this {'/'.join(dtypes)} module: a code path that runs only in "
            f"{dtypes[0]} (not in float64) is not checked"
        )
    for name, param in model.named_parameters():
        if name not in first:  # frozen: no gradient to check
            continue
        analytical = _gradient(first[name], name, param.data.shape)
        check = _compare(
            name, param.data, analytical, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise, report.rounding
        )
        report.checks.append(check)
    if check_input:
        dx = _gradient(dx, "x", x64.shape)
        check = _compare("x", x64, dx, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise, report.rounding)
        report.checks.append(check)
    if report.failures:  # a tensor failed (not only the accumulation): was it the other input's gradient?
        report.reason = _other_input(model, other, G, first, dx if check_input else None, report, eps, rtol, rng)
    return _finish(report, raise_exception)


def _other_input(
    model: Module,
    other: np.ndarray,
    G: np.ndarray,
    first: Mapping[str, np.ndarray],
    dx: np.ndarray | None,
    report: GradcheckReport,
    eps: float,
    rtol: float,
    rng: np.random.Generator,
) -> str:
    """Why the failed tensors failed, when their analytical gradients are those of the other input
    (run before x): the backward keeps state between calls. "" otherwise."""
    failed = [c.name for c in report.failures]
    params = dict(model.named_parameters())

    def loss() -> float:
        out = _check_output(model(other.copy()), "gradcheck")
        if out.shape != G.shape:
            raise ConfigError("the other input's output has another shape")
        return float(np.sum(out * G))

    try:
        for name in failed:
            target, grad = (other, dx) if name == "x" and dx is not None else (params[name].data, first.get(name))
            if grad is None:
                return ""
            if not _compare(name, target, grad, loss, eps, report.atol, rtol, False, 1, rng, report.noise).passed:
                return ""
    except (ConfigError, KeyError):  # the other input's forward is not finite, or of another shape: no verdict
        return ""
    return (
        f"gradcheck: the backward gives another input's gradient: its gradient of {', '.join(failed)} is that of "
        "the input run before x (a forward and backward on another input run first), so it keeps state between "
        "calls (a cache or gradients saved on the first call); compute the gradient from this call's forward"
    )

def _check_accumulates(model: Module, x: np.ndarray, G: np.ndarray, first: Mapping[str, np.ndarray]) -> str:
    """A second forward and backward must add the same gradient again (``.grad`` accumulates, as in
    PyTorch): a backward that assigns ``.grad`` passes a check from zeroed grads, yet breaks every
    gradient summed over several backward calls. Returns why not, naming the first parameter whose
    ``.grad`` is not twice the first gradient ("" when every one is)."""
    model(x.copy())
    model.backward(G.copy())
    for name, param in model.named_parameters():
        if name not in first:
            continue
        twice, grad = 2 * first[name], param.grad
        if not (isinstance(grad, np.ndarray) and grad.shape == twice.shape and np.allclose(grad, twice, 1e-9, 0)):
            model.zero_grad()
            return (
                f"gradcheck: after a second backward, {name}.grad is not twice the first gradient: backward must "
                "add its gradient to .grad once (param.grad += ..., as PyTorch accumulates), neither assign nor "
                "rescale .grad"
            )
    model.zero_grad()
    return ""
