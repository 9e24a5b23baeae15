"""The comparison of one tensor: central differences against the analytical gradient, with the
steps and tolerances a small gradient needs (see ``npattn.gradcheck``'s docstring)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npattn.errors import ConfigError, GradcheckError
from npattn.gradcheck.report import DETECTS, TensorCheck, max_relative_error


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
"""The steps a small gradient is tried at, as multiples of eps (see ``_sharpest``)."""


def _sharpest(
    target: np.ndarray,
    loss: Callable[[], float],
    numerical: np.ndarray,
    eps: float,
    noise: float,
    at_eps: float,
    rtol: float,
    directions: np.ndarray | None,
) -> tuple[np.ndarray, float, float]:
    """(numerical, atol, h) at the step h of ``STEPS`` whose atol is the smallest (eps's ``at_eps``
    unless a step does better), stopping at the first whose atol fails a gradient x 1.0001. A step's
    atol is the differences' error measured at h against 2h (ten times it), and at least the rounding
    noise at h (``noise`` at eps, times eps / h). A larger step must agree with eps's differences
    within ``at_eps``: a staircase, flat at eps, is not averaged into a slope; the steps end there,
    or where the forward is not finite. W_query's gradient behind a saturated softmax, 6e-8, passed
    x 1.1 at eps (its atol was that noise, 1e-8; at 100 eps the differences agree to 1e-10)."""
    best = (numerical, at_eps, eps)
    for factor in STEPS:
        h = eps * factor
        try:
            at_h = numerical if factor == 1.0 else _numerical(target, loss, h, directions)
            at_2h = _numerical(target, loss, 2 * h, directions)
        except ConfigError:  # the forward is not finite that far from the point
            break
        if float(np.max(np.abs(at_h - numerical))) > at_eps:
            break  # the larger step sees another slope than eps does (a staircase averaged out)
        atol = max(noise / factor, 10 * float(np.max(np.abs(at_h - at_2h))))
        if atol < best[1]:
            best = (at_h, atol, h)
        scale = float(np.max(np.abs(best[0])))
        if best[1] + rtol * scale < DETECTS * scale:
            break
    return best


LADDER_FLOOR = 1e-6
"""The smallest step ``_truncation`` tries below eps (the default eps): smaller ones add rounding noise."""


def _ladder(eps: float, target: np.ndarray) -> list[float]:
    """The steps below eps that ``_truncation`` tries: eps / 2, then eps / 10, eps / 100, ... while at
    least ``LADDER_FLOOR`` and the smallest step float64 allows at the target's magnitudes."""
    floor = max(LADDER_FLOOR, 1e-10 * max(1.0, float(np.max(np.abs(target), initial=0.0))))
    steps = [eps / 2]
    h = eps / 10
    while h >= floor:
        steps.append(h)
        h /= 10
    return steps


def _truncation(
    name: str,
    target: np.ndarray,
    loss: Callable[[], float],
    eps: float,
    numerical: np.ndarray,
    analytic: np.ndarray,
    directions: np.ndarray | None,
    tolerance: tuple[float, float, float],
) -> tuple[str, str]:
    """(why a failing tensor is failed by its differences, not its backward; why its backward is
    wrong), each "" when not found, tried at smaller steps (``_ladder``) with ``tolerance`` = (atol,
    the allowed error at eps, the differences' rounding noise at eps, which grows as 1 / step):
    - at a smaller step the tensor passes: eps is too large (truncation error falls as eps**2);
    - the differences settle (two steps agree to 1% of their size and a tenth of their error; far
      beyond the loss's scale they agree only by being near 0) off the backward by more than is
      allowed with the noise at that step: the backward is
      wrong, whatever the noise at eps (a sign flip's error halved at eps / 2 but stayed a million
      times the allowed, and was called eps's fault);
    - the error shrinks to half but the differences never settle down to the smallest step: eps is
      too large for the scale on which the loss is smooth (eps=15 on the book's inputs: its error
      did not halve at 7.5, and a correct module was called wrong).
    ``_finish`` raises it as a ConfigError when every failing tensor is so, and fails the backward
    when any is not. The differences are judged settled at the ladder's last step only (down to
    1e-6: a wrong backward at a large eps costs the whole ladder)."""
    atol, allowed, rounding = tolerance
    at_eps = float(np.max(np.abs(numerical - analytic)))
    before, shrank, settled = numerical, None, ""
    for h in _ladder(eps, target):
        try:
            smaller = _numerical(target, loss, h, directions)
        except ConfigError:  # the forward is not finite there
            break
        error = np.abs(smaller - analytic)
        at_h = float(np.max(error))
        noise = rounding * eps / h
        passes = at_h <= allowed + noise and bool(np.all(error <= atol + DETECTS * np.abs(smaller) + noise))
        if passes and at_h < 0.5 * at_eps:  # shrunk to within what is allowed
            shrank = (h, at_h)
            break
        moved = float(np.max(np.abs(smaller - before)))
        settled = ""  # judged at the smallest step: far out, secants of a nearly linear loss agree too
        if at_h > allowed + noise and moved <= 0.1 * at_h and moved <= 0.01 * float(np.max(np.abs(smaller))):
            worst = np.unravel_index(int(np.argmax(error)), error.shape)
            settled = (  # the differences agree with one another (to 1%), not with the backward
                f"at step {h:g} the differences settle at {float(smaller[worst]):.10g} there (analytical "
                f"{float(analytic[worst]):.10g}), so the backward, not eps, is wrong"
            )
        if shrank is None and at_h < 0.5 * at_eps:
            shrank = (h, at_h)
        before = smaller
    else:
        if settled:
            return "", settled
    if shrank is None:
        return "", ""
    return (
        f"gradcheck: eps={eps:g} is too large for {name}: its differences are off by {at_eps:.3g} at eps and by "
        f"{shrank[1]:.3g} at {shrank[0]:g} (truncation error, which falls as eps**2), so they, not the backward, are "
        "wrong; use a smaller eps (the default is 1e-6)"
    ), ""


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
    rounding: float = 0.0,
) -> TensorCheck:
    """Central differences of ``loss`` w.r.t. ``target`` against ``analytical``. ``noise``: the
    differences' rounding noise at eps when ``atol`` is the default (then a gradient too small for
    it is resolved with ``_sharpest``); None for a caller's atol, which is used as it is.
    ``rounding``: that noise whatever the atol; a tensor that fails at eps gets its ``noise_floor``,
    what the differences can tell (``_noise_floor``)."""
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
    if noise is not None and numerical.size and atol + rtol * scale >= DETECTS * scale:  # x 1.0001 passes at eps
        found, at_found, step_found = _sharpest(target, loss, numerical, eps, noise, atol, rtol, directions)
        found_scale = float(np.max(np.abs(found)))
        if atol + rtol * scale >= scale:  # a missing gradient passes at eps: resolved where it fails
            resolved = at_found + rtol * found_scale < found_scale
        # the sharpest step, also unresolved where a sign flip fails there (a goal of "missing" alone let a
        # flipped tiny gradient pass; a sign flip as the goal let a missing one count as resolved)
        if resolved or at_found + rtol * found_scale < 2 * found_scale:
            numerical, atol, step, scale = found, at_found, step_found, found_scale
    allowed = atol + rtol * scale
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
    floor, truncation, settled = None, "", ""
    if step == eps and (element is not None or float(np.max(error)) > allowed):  # failed at eps: why?
        floor = _noise_floor(target, loss, eps, numerical, rounding, directions)
        tolerance = (atol, allowed, rounding)
        truncation, settled = _truncation(name, target, loss, eps, numerical, analytic, directions, tolerance)
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
        noise_floor=floor,
        truncation=truncation,
        settled=settled,
    )


def _noise_floor(
    target: np.ndarray,
    loss: Callable[[], float],
    eps: float,
    numerical: np.ndarray,
    rounding: float,
    directions: np.ndarray | None,
) -> float:
    """The error below which the differences at eps cannot tell a right gradient from a wrong one:
    the rounding noise at eps, or ten times the change between the differences at eps and 2 eps
    when larger (the atol the default check gives a tensor by the same measure)."""
    at_2h = _numerical(target, loss, 2 * eps, directions)
    return max(rounding, 10 * float(np.max(np.abs(numerical - at_2h))))
