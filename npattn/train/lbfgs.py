"""fit_lbfgs: SciPy's L-BFGS-B on the hand-derived gradients (``jac=True``). A wrong gradient makes
L-BFGS stall, so this is also a test of backward."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npattn._checks import check_positive_int
from npattn.errors import ConfigError
from npattn.nn.losses import Loss
from npattn.nn.module import Module
from npattn.train.loop import History, check_criterion, check_finite

__all__ = ["fit_lbfgs"]

_NO_LR = "L-BFGS has no learning rate: check the starting weights, and the model and criterion for overflow"


def _check_finite_input(values: Any, name: str) -> None:
    """A real-number ``x`` or ``target`` without NaN or inf (a NaN makes every loss NaN, which L-BFGS
    would report only as a failed evaluation); other inputs are left to the model and criterion."""
    array = values if isinstance(values, np.ndarray) else None
    if array is None:
        try:
            array = np.asarray(values)
        except (TypeError, ValueError):
            return
    if array.dtype.kind not in "fc":
        return
    bad = array.size - int(np.count_nonzero(np.isfinite(array)))
    if bad:
        raise ConfigError(
            f"fit_lbfgs: {name} holds {bad} NaN or inf value{'s' if bad != 1 else ''} (of {array.size}, shape "
            f"{array.shape}); every loss would be non-finite: clean or mask the input first"
        )


def fit_lbfgs(
    model: Module,
    criterion: Loss,
    x: np.ndarray,
    target: Any,
    *,
    maxiter: int = 200,
    gtol: float = 1e-10,
    ftol: float = 1e-15,
) -> tuple[History, Any]:
    """Minimise ``criterion(model(x), target)`` over all parameters with SciPy's L-BFGS-B.

    The parameters are flattened into one vector theta; ``fun(theta)`` writes theta into them,
    runs forward, loss and the hand-derived backward, and returns (loss, flattened gradient)
    (``jac=True``). A wrong gradient makes L-BFGS stall, so this is also a test of backward.
    Returns (history: ``loss[i]`` after i iterations, from the start, and the moved norms; scipy's result);
    the model holds the best parameters found.

    Raises:
        ConfigError: ``x`` or ``target`` holds NaN or inf (checked before the first evaluation), a
            bad ``maxiter``/``gtol``/``ftol`` or criterion.
        TrainingError: the loss or gradient became non-finite (the model keeps its last finite values).
    """
    from scipy.optimize import minimize  # SciPy is a runtime dependency; imported here to keep startup quick

    check_positive_int(maxiter, "maxiter")
    check_criterion(criterion, "fit_lbfgs")
    for name, tol in (("gtol", gtol), ("ftol", ftol)):
        if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and math.isfinite(tol) and tol >= 0):
            raise ConfigError(f"fit_lbfgs: {name} must be a finite number >= 0, got {tol!r}")

    for name, values in (("x", x), ("target", target)):
        _check_finite_input(values, name)

    params = [p for p in model.parameters() if p.requires_grad]
    shapes = [p.shape for p in params]
    sizes = [p.size for p in params]
    history = History.begin(model)

    def unflatten(theta: np.ndarray) -> None:
        for p, chunk, shape in zip(params, np.split(theta, np.cumsum(sizes)[:-1]), shapes):
            p.data = chunk.reshape(shape).astype(p.dtype)

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        unflatten(theta)
        model.zero_grad()
        loss = criterion(model(x), target)
        model.backward(criterion.backward())
        check_finite(model, loss, max(len(history.loss) - 1, 0), _NO_LR)
        return float(loss), np.concatenate([np.ravel(p.grad) for p in params if p.grad is not None]).astype(np.float64)

    def callback(intermediate_result: Any) -> None:
        history.loss.append(float(intermediate_result.fun))
        unflatten(intermediate_result.x)
        history.log(model, len(history.loss) - 1)

    theta0 = np.concatenate([p.data.ravel() for p in params]).astype(np.float64)
    history.loss.append(fun(theta0)[0])
    result = minimize(
        fun,
        theta0,
        jac=True,
        method="L-BFGS-B",
        callback=callback,
        options={"maxiter": maxiter, "gtol": gtol, "ftol": ftol},
    )
    unflatten(result.x)
    model.zero_grad()
    return history, result


