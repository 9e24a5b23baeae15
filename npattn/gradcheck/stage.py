"""``gradcheck_stage``: the gradient check of one forward/backward pair of ``npattn.functional``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from npattn._checks import as_array, from_tensor
from npattn.errors import ConfigError, GradcheckError
from npattn.gradcheck.compare import _compare
from npattn.gradcheck.gradients import _gradient, _match_gradients
from npattn.gradcheck.report import GradcheckReport, _finish
from npattn.gradcheck.settings import _check_eps, _check_output, _check_same, _check_settings, _new_report


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
    n_directions: int | None = None,
) -> GradcheckReport:
    """Check one forward/backward pair of ``npattn.functional`` in isolation.

    ``forward(*inputs, **kwargs) -> (out, cache)`` and ``backward(G, cache)`` returning one
    gradient per input (``kwargs`` holds what is not differentiated: a mask, a scale, a
    dropout mask). Inputs are copied to float64; an integer or boolean input is checked as float64
    when the forward accepts it so, and otherwise (token ids, refused as floats) passed unchanged,
    unperturbed and named in the report as not checked. ``backward`` returns a tuple of one
    gradient per input (whatever it returns for an unchecked input is ignored), per checked input,
    or per floating-point input as given. Every forward call gets its own copy of the inputs (a
    forward may edit them in place). The forward runs on other inputs first, as in ``gradcheck``: a
    backward that keeps an earlier forward's state instead of its ``cache`` fails, and the error
    says so.

    Example::

        gradcheck_stage(F.scores_forward, F.scores_backward, [queries, keys], names=["queries", "keys"])

    Raises:
        GradcheckError: a tensor failed and ``raise_exception`` is True; ``forward`` did not return
            ``(out, cache)`` with ``out`` an ndarray of floats; ``backward`` returned another count
            of gradients, or a gradient that is not real numbers (complex, booleans, strings, None).
        ConfigError: ``forward``/``backward`` not callable; ``inputs`` not a non-empty list or
            tuple; ``kwargs`` not a dict; an input or an output with no elements; only inputs the
            forward refuses as floats; a forward output holding NaN or inf; ``backward`` returning
            a bare array instead of a tuple, or no gradient for a number passed as an input (it
            belongs in ``kwargs``); the settings ``gradcheck`` refuses (a tolerance below the
            differences' own noise among them).
    """
    n_directions = _check_settings(
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
    names = list(names) if names is not None else [f"input{i}" for i in range(len(arrays))]
    if len(names) != len(arrays):
        raise ConfigError(f"gradcheck_stage: {len(names)} names for {len(arrays)} inputs")
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ConfigError(
            f"gradcheck_stage: names must be distinct, non-empty strings, one per input, got {names!r:.200}"
        )
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
    given = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]  # floating-point as given
    unchecked = _as_floats(forward, arrays, kwargs)  # integer inputs the forward refuses as floats (token ids)
    floats = [i for i in range(len(arrays)) if i not in unchecked]
    if not floats:
        raise ConfigError(
            f"gradcheck_stage: every input is integer or boolean ({', '.join(names)}) and the forward refuses them "
            "as floats (token ids), so there is no gradient to check; integer inputs (token ids) are passed "
            "unchanged next to at least one floating-point input"
        )
    eps_floor = _check_eps(eps, [arrays[i] for i in floats])
    rng = np.random.default_rng(seed)

    def run() -> tuple[np.ndarray, Any]:
        """forward on a fresh copy of the inputs (a forward may edit them in place); out as floats."""
        result = forward(*(a.copy() for a in arrays), **kwargs)
        if not isinstance(result, tuple) or len(result) != 2:
            raise GradcheckError(f"gradcheck_stage: forward must return (out, cache), got {type(result).__name__}")
        return _check_output(result[0], "gradcheck_stage"), result[1]

    # a forward on other inputs first and last, as gradcheck does, and a backward of the other cache
    # before the checked one: a backward that keeps an earlier call's state instead of the cache it is
    # given (a cache saved on the first call, the last forward's global) then gives the other inputs'
    # gradient and fails
    earlier = [np.roll(a, 1) if a.dtype.kind in "iub" else np.array(a * 0.5 + 0.25) for a in arrays]
    forward(*(a.copy() for a in earlier), **kwargs)
    first_out = run()[0]
    out, cache = run()
    _check_same(first_out, out, "gradcheck_stage")
    if out.size == 0:
        raise ConfigError(
            f"gradcheck_stage: forward returned an output with no elements (shape {np.shape(out)}): "
            "L = sum(out * G) is always 0, so no wrong gradient could fail the check"
        )
    G = rng.standard_normal(np.shape(out))
    other_cache = forward(*(a.copy() for a in earlier), **kwargs)[1]
    with np.errstate(all="ignore"):  # the other inputs' backward is only run, never compared
        backward(G.copy(), other_cache)
    grads = backward(G.copy(), cache)  # a copy: a backward that edits its d_out must not change G
    floats = _match_gradients(grads, forward, inputs, arrays, names, given, floats, unchecked)
    by_input = dict(zip(floats, grads)) if len(grads) != len(arrays) else dict(enumerate(grads))
    skipped = [f"{names[i]}: {unchecked.get(i, 'integer, no gradient returned')}, not checked"
               for i in range(len(arrays)) if i not in floats]  # fmt: skip

    def loss() -> float:
        return float(np.sum(run()[0] * G))

    report = _new_report(out, G, eps, atol, rtol)
    report.eps_floor = eps_floor
    low = sorted({str(d) for a in inputs if (d := getattr(from_tensor(a), "dtype", None)) is not None
                  and d.kind == "f" and d.itemsize < 8})  # fmt: skip
    if low:  # as gradcheck says of a module in another dtype
        report.copied = (
            f"note: checked on float64 copies of the {'/'.join(low)} inputs: a code path that runs only in "
            f"{low[0]} (not in float64) is not checked"
        )
    report.unchecked = "; ".join(skipped)
    report.note = "\n".join(filter(None, [report.note, report.unchecked_note]))
    atol, noise = report.atol, report.noise
    for i in floats:
        grad = _gradient(by_input[i], names[i], arrays[i].shape)
        check = _compare(
            names[i], arrays[i], grad, loss, eps, atol, rtol, fast_mode, n_directions, rng, noise, report.rounding
        )
        report.checks.append(check)
    if not report.passed:
        report.reason = _earlier_forward(forward, earlier, kwargs, G, report, by_input, floats, eps, rtol, rng)
    return _finish(report, raise_exception)


def _earlier_forward(
    forward: Callable[..., tuple[np.ndarray, Any]],
    earlier: list[np.ndarray],
    kwargs: dict[str, Any],
    G: np.ndarray,
    report: GradcheckReport,
    by_input: dict[int, Any],
    floats: list[int],
    eps: float,
    rtol: float,
    rng: np.random.Generator,
) -> str:
    """Why the failed tensors failed, when their analytical gradients are those of the other inputs
    (run before): the backward keeps state between calls instead of using the cache it is given.
    "" otherwise."""
    failed = {c.name for c in report.failures}

    def loss() -> float:
        result = forward(*(a.copy() for a in earlier), **kwargs)
        out = _check_output(result[0], "gradcheck_stage")
        if out.shape != G.shape:
            raise ConfigError("the earlier forward's output has another shape")
        return float(np.sum(out * G))

    try:
        for i, check in zip(floats, report.checks):
            if check.name in failed:
                grad = _gradient(by_input[i], check.name, earlier[i].shape)
                at = _compare(check.name, earlier[i], grad, loss, eps, report.atol, rtol, False, 1, rng, report.noise)
                if not at.passed:
                    return ""
    except ConfigError:  # the earlier forward is not finite, or of another shape: no verdict
        return ""
    names = ", ".join(c.name for c in report.failures)
    return (
        f"gradcheck_stage: the backward does not use the cache it is given: its gradient of {names} is another input's "
        "gradient (the forward and backward run on other inputs before these), so it keeps state between calls "
        "(a cache saved on the first call, the last forward's global); compute the gradient from the cache argument"
    )


def _stage_input(value: Any, name: str) -> np.ndarray:
    """A stage input as float64, or unchanged when it holds integers or booleans (``_as_floats``
    decides whether they are checked)."""
    arr = as_array(value, name)  # refuses ragged and non-numeric data with a clear message
    raw = np.asarray(from_tensor(value))
    return np.array(raw) if raw.dtype.kind in "iub" else np.array(arr, dtype=np.float64)


def _as_floats(forward: Callable[..., Any], arrays: list[np.ndarray], kwargs: dict[str, Any]) -> dict[int, str]:
    """Convert (in ``arrays``) each integer or boolean input the forward accepts as float64 numbers,
    so that its gradient is checked; {index: why} for those it refuses as floats (token ids for an
    embedding): those are passed unchanged and named in the report as not checked."""
    refused: dict[int, str] = {}
    candidates = [i for i, a in enumerate(arrays) if a.dtype.kind in "iub"]
    if len(candidates) > 1:  # all at once first: a forward may refuse a float beside a bool or int one
        try:
            forward(*(a.astype(np.float64) if i in candidates else a.copy() for i, a in enumerate(arrays)), **kwargs)
        except Exception:
            pass
        else:
            for i in candidates:
                arrays[i] = arrays[i].astype(np.float64)
            return refused
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "iub":
            continue
        trial = [b.astype(np.float64) if j == i else b.copy() for j, b in enumerate(arrays)]
        try:
            forward(*trial, **kwargs)
        except Exception:  # refused as floats: token ids, indices
            refused[i] = "boolean" if a.dtype.kind == "b" else "integer ids"
            continue
        arrays[i] = a.astype(np.float64)
    return refused
