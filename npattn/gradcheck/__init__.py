"""Finite-difference gradient checks: for whole modules and for single stage pairs.

Both checks work in float64 with central differences, on the loss L = sum(output * G) with a
random upstream gradient G (never sum(output): softmax rows sum to one, so the true gradient of
that loss w.r.t. the scores is zero and a broken softmax backward would pass).

A tensor passes when max|numerical - analytical| <= atol + rtol * max|numerical|, judged per
tensor. With eps = 1e-6 in float64 the finite-difference error is about 1e-10 of the gradient's
scale, so the defaults (atol = 1e-8, or the rounding noise ``difference_noise`` when larger;
rtol = 1e-6) reject a gradient scaled by 1.0001 (an error of 1e-4 of the scale) by a factor of
about 100, and pass a correct one with a margin of about 100 or more.

With the default atol, a tensor whose gradient would pass with its sign flipped (it is below
atol, or far below the other outputs' rounding noise) gets an atol of its own (``_resolve``):
ten times the change between the differences at step h and 2h, at least the rounding noise at h,
at h = eps, 100 eps or 10^4 eps; below the noise at every step, the report says so in a note.
A backward must add to ``.grad``: a second forward and backward must double every gradient.

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
from typing import Any

import numpy as np

from npattn._checks import as_array, from_tensor
from npattn.errors import ConfigError, DTypeError, GradcheckError
from npattn.gradcheck.report import DETECTS, GradcheckReport, TensorCheck, _finish, max_relative_error
from npattn.gradcheck.settings import (
    DIFFERENCE_NOISE,
    MIN_EPS,
    _check_eps,
    _check_output,
    _check_settings,
    _new_report,
    difference_noise,
)
from npattn.nn.layers import check_deterministic
from npattn.nn.module import Module

__all__ = ["DETECTS", "GradcheckReport", "TensorCheck", "gradcheck", "gradcheck_stage"]
__all__ += ["DIFFERENCE_NOISE", "MIN_EPS", "difference_noise", "max_relative_error"]


def _numerical(target: np.ndarray, loss: Callable[[], float], h: float, directions: np.ndarray | None) -> np.ndarray:
    """Central differences (L(t + h v) - L(t - h v)) / 2h of ``loss`` w.r.t. ``target`` (perturbed in
    place, then restored): along each of ``directions``, or (None) along every element."""
    if directions is not None:
        numerical = np.empty(len(directions))
        for k, v in enumerate(directions):
            original = target.copy()
            target += h * v
            plus = loss()
            target[...] = original - h * v
            minus = loss()
            target[...] = original
            numerical[k] = (plus - minus) / (2 * h)
        return numerical
    numerical = np.empty(target.shape)
    for index in np.ndindex(*target.shape):
        original = target[index]
        target[index] = original + h
        plus = loss()
        target[index] = original - h
        minus = loss()
        target[index] = original
        numerical[index] = (plus - minus) / (2 * h)
    return numerical


STEPS = (1.0, 100.0, 10000.0)
"""The steps a small gradient is tried at, as multiples of eps (see ``_resolve``)."""


def _resolve(
    target: np.ndarray,
    loss: Callable[[], float],
    numerical: np.ndarray,
    eps: float,
    noise: float,
    at_eps: float,
    rtol: float,
    directions: np.ndarray | None,
) -> tuple[np.ndarray, float, float] | None:
    """A tensor whose gradient is so small that the default atol would pass it with its sign
    flipped gets its own atol: the differences' error measured at step h against step 2h (ten
    times it), and the rounding noise at h (``noise`` at eps, times eps / h). The first step h of
    ``STEPS`` at which a sign flip fails wins: (numerical, atol, h). A larger step must agree with
    eps's differences within ``at_eps`` (eps's atol): a staircase, flat at eps, is not averaged
    into a slope. None: no step resolves the gradient (it is zero within the noise, the steps
    disagree, or the forward is not finite at the larger steps)."""
    for factor in STEPS:
        h = eps * factor
        try:
            at_h = numerical if factor == 1.0 else _numerical(target, loss, h, directions)
            at_2h = _numerical(target, loss, 2 * h, directions)
        except ConfigError:  # the forward is not finite that far from the point
            return None
        if float(np.max(np.abs(at_h - numerical))) > at_eps:
            return None  # the larger step sees another slope than eps does (a staircase averaged out)
        atol = max(noise / factor, 10 * float(np.max(np.abs(at_h - at_2h))))
        scale = float(np.max(np.abs(at_h)))
        if atol + rtol * scale < 2 * scale:
            return at_h, atol, h
    return None


def _refuse_truncation(
    name: str,
    target: np.ndarray,
    loss: Callable[[], float],
    eps: float,
    numerical: np.ndarray,
    analytic: np.ndarray,
    directions: np.ndarray | None,
) -> None:
    """A failing tensor whose error shrinks at eps / 2 (truncation error falls as eps**2, a wrong
    backward's error does not) is failed by its differences, not its backward.

    Raises:
        ConfigError: eps too large, naming the tensor and both errors.
    """
    half = _numerical(target, loss, eps / 2, directions)
    at_eps = float(np.max(np.abs(numerical - analytic)))
    at_half = float(np.max(np.abs(half - analytic)))
    if at_half < 0.5 * at_eps:
        raise ConfigError(
            f"gradcheck: eps={eps:g} is too large for {name}: its differences are off by {at_eps:.3g} at eps and by "
            f"{at_half:.3g} at eps / 2 (truncation error, which falls as eps**2), so they, not the backward, are "
            "wrong; use a smaller eps (the default is 1e-6)"
        )


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
    noise: float | None = None,
) -> TensorCheck:
    """Central differences of ``loss`` w.r.t. ``target`` against ``analytical``. ``noise``: the
    differences' rounding noise at eps when ``atol`` is the default (then a gradient too small for
    it is resolved with ``_resolve``); None for a caller's atol, which is used as it is."""
    if analytical.shape != target.shape:
        raise GradcheckError(
            f"analytical gradient of {name} has shape {analytical.shape}, expected {target.shape} (the tensor's shape)"
        )
    directions = None
    if fast_mode:
        directions = rng.standard_normal((n_directions, *target.shape))
        directions /= np.sqrt(np.sum(directions**2, axis=tuple(range(1, directions.ndim)), keepdims=True)) + 1e-300
        analytic = np.array([np.sum(analytical * v) for v in directions])
    else:
        analytic = analytical.astype(np.float64)
    numerical = _numerical(target, loss, eps, directions)
    scale = float(np.max(np.abs(numerical))) if numerical.size else 0.0
    step, resolved = eps, True
    if noise is not None and numerical.size and atol + rtol * scale >= 2 * scale:  # a sign flip would pass
        found = _resolve(target, loss, numerical, eps, noise, atol, rtol, directions)
        resolved = found is not None
        if found is not None:
            numerical, atol, step = found
            scale = float(np.max(np.abs(numerical)))
    elif noise is not None and numerical.size and atol + rtol * scale >= DETECTS * scale:
        # a sign flip fails but 0.01% would pass: the atol of what the differences can tell (h against 2h)
        at_2h = _numerical(target, loss, 2 * eps, directions)
        atol = min(atol, max(noise, 10 * float(np.max(np.abs(numerical - at_2h)))))
    allowed = atol + rtol * scale
    if numerical.size and step == eps and float(np.max(np.abs(numerical - analytic))) > allowed:
        _refuse_truncation(name, target, loss, eps, numerical, analytic, directions)
    if numerical.size == 0:
        return TensorCheck(name, target.shape, 0.0, 0.0, allowed, (), 0.0, 0.0, fast_mode, scale)
    error = np.abs(numerical - analytic)
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    # each element against its own size too: a small row of a tensor with huge entries elsewhere
    own = atol + DETECTS * np.abs(numerical)
    element = None
    if float(np.max(error)) <= allowed and np.any(error > own):
        worst = np.unravel_index(int(np.argmax(error / own)), error.shape)
        element = float(own[worst])
    return TensorCheck(
        name=name,
        shape=target.shape,
        max_abs_error=float(np.max(error)),
        max_rel_error=max_relative_error(error, numerical),
        allowed=allowed,
        worst_index=tuple(int(i) for i in worst),
        numerical=float(numerical[worst]),
        analytical=float(analytic[worst]),
        directional=fast_mode,
        scale=scale,
        step=step,
        resolved=resolved,
        element_allowed=element,
        element_error=None if element is None else float(error[worst]),
    )


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
    Every forward call gets its own copy of x (a forward may edit its input in place).

    Returns:
        GradcheckReport, truthy when every tensor passed.
    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True (names the tensor, the
            index, the numerical and the analytical value); the forward returned something other
            than an ndarray of floats (a tuple, None, integers).
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
    # a forward on another input first: a backward that keeps state from its first call (a stale
    # cache, a running sum) is then differentiated against the wrong forward and fails
    model(np.roll(x64, 1) if ids else x64 * 0.5 + 0.25)
    first_out = _check_output(model(x64.copy()), "gradcheck")  # a copy for every call: a forward may edit its input
    out = _check_output(model(x64.copy()), "gradcheck")
    _check_same(first_out, out, "gradcheck")
    G = rng.standard_normal(out.shape)
    try:
        dx = model.backward(G.copy())  # a copy: a backward that edits its grad_output must not change G
    except NotImplementedError as exc:
        raise ConfigError(f"gradcheck needs a module with a backward: {exc}") from None

    def loss() -> float:
        return float(np.sum(_check_output(model(x64.copy()), "gradcheck") * G))

    first = {name: p.grad.copy() for name, p in model.named_parameters() if isinstance(p.grad, np.ndarray)}
    _check_accumulates(model, x64, G, first)
    report = _new_report(out, G, eps, atol, rtol)
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
        analytical = first[name]
        check = _compare(name, param.data, analytical, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise)
        report.checks.append(check)
    if check_input:
        dx = np.asarray(dx)
        report.checks.append(_compare("x", x64, dx, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise))
    return _finish(report, raise_exception)


def _check_same(first: np.ndarray, second: np.ndarray, who: str) -> None:
    """Two forwards of the same input must agree: finite differences of a random forward are noise.

    Raises:
        ConfigError: naming the largest difference.
    """
    if first.shape != second.shape or not np.array_equal(first, second):
        diff = float(np.max(np.abs(first - second))) if first.shape == second.shape else float("inf")
        raise ConfigError(
            f"{who}: two forwards of the same input differ (by up to {diff:.3g}): the forward is random (np.random, "
            "an unfixed dropout mask), so its finite differences are noise; make it deterministic first"
        )


def _check_accumulates(model: Module, x: np.ndarray, G: np.ndarray, first: Mapping[str, np.ndarray]) -> None:
    """A second forward and backward must add the same gradient again (``.grad`` accumulates, as in
    PyTorch): a backward that assigns ``.grad`` passes a check from zeroed grads, yet breaks every
    gradient summed over several backward calls.

    Raises:
        GradcheckError: naming the first parameter whose ``.grad`` is not twice the first gradient.
    """
    model(x.copy())
    model.backward(G.copy())
    for name, param in model.named_parameters():
        if name not in first:
            continue
        twice, grad = 2 * first[name], param.grad
        if not (isinstance(grad, np.ndarray) and grad.shape == twice.shape and np.allclose(grad, twice, 1e-9, 0)):
            raise GradcheckError(
                f"gradcheck: after a second backward, {name}.grad is not twice the first gradient: backward must "
                "add its gradient to .grad once (param.grad += ..., as PyTorch accumulates), neither assign nor "
                "rescale .grad"
            )
    model.zero_grad()


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
    dropout mask). Inputs are copied to float64, except integer inputs (token ids), which are
    passed unchanged and unperturbed, with no gradient checked: ``backward`` may return one
    gradient per input (whatever it returns for an integer input is ignored) or one per
    floating-point input. Every forward call gets its own copy of the inputs (a forward may edit
    them in place).

    Example::

        gradcheck_stage(F.scores_forward, F.scores_backward, [queries, keys], names=["queries", "keys"])

    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True; ``forward`` did not return
            ``(out, cache)`` with ``out`` an ndarray of floats, or ``backward`` not one gradient per
            input (or per floating-point input).
        ConfigError: ``forward``/``backward`` not callable; ``inputs`` not a non-empty list or
            tuple; ``kwargs`` not a dict; an input or an output with no elements; only integer
            inputs; a forward output holding NaN or inf; the settings ``gradcheck`` refuses.
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
    arrays = [_stage_input(a, f"inputs[{i}]") for i, a in enumerate(inputs)]
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]  # integer inputs: no gradient
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
    if not floats:
        raise ConfigError(
            f"gradcheck_stage: every input is integer ({', '.join(names)}), so there is no gradient to check; "
            "integer inputs (token ids) are passed unchanged next to at least one floating-point input"
        )
    _check_eps(eps, [arrays[i] for i in floats])
    rng = np.random.default_rng(seed)

    def run() -> tuple[np.ndarray, Any]:
        """forward on a fresh copy of the inputs (a forward may edit them in place); out as floats."""
        result = forward(*(a.copy() for a in arrays), **kwargs)
        if not isinstance(result, tuple) or len(result) != 2:
            raise GradcheckError(f"gradcheck_stage: forward must return (out, cache), got {type(result).__name__}")
        return _check_output(result[0], "gradcheck_stage"), result[1]

    first_out = run()[0]
    out, cache = run()
    _check_same(first_out, out, "gradcheck_stage")
    if out.size == 0:
        raise ConfigError(
            f"gradcheck_stage: forward returned an output with no elements (shape {np.shape(out)}): "
            "L = sum(out * G) is always 0, so no wrong gradient could fail the check"
        )
    G = rng.standard_normal(np.shape(out))
    grads = backward(G.copy(), cache)  # a copy: a backward that edits its d_out must not change G
    if not isinstance(grads, (list, tuple)) or len(grads) not in (len(arrays), len(floats)):
        got = f"{len(grads)} gradients" if isinstance(grads, (list, tuple)) else type(grads).__name__
        per_float = "" if len(floats) == len(arrays) else f", or one per floating-point input ({len(floats)})"
        raise GradcheckError(
            f"backward returned {got} for {len(arrays)} inputs (expected one gradient per input{per_float})"
        )
    by_input = dict(zip(floats, grads)) if len(grads) != len(arrays) else dict(enumerate(grads))

    def loss() -> float:
        return float(np.sum(run()[0] * G))

    report = _new_report(out, G, eps, atol, rtol)
    atol, noise = report.atol, report.noise
    for i in floats:
        grad = np.asarray(by_input[i])
        check = _compare(names[i], arrays[i], grad, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise)
        report.checks.append(check)
    return _finish(report, raise_exception)


def _stage_input(value: Any, name: str) -> np.ndarray:
    """A stage input as float64, or unchanged when it holds integers (token ids: not differentiated)."""
    arr = as_array(value, name)  # refuses ragged and non-numeric data with a clear message
    raw = np.asarray(from_tensor(value))
    return np.array(raw) if raw.dtype.kind in "iu" else np.array(arr, dtype=np.float64)
