"""The backward run again after a forward on a second input: a backward that keeps state from an
earlier call (the first forward's cache, a running sum of its gradients) is right only the first time.

``second_backward_problem`` runs the user's backward on a second input of the same shape (its
forward runs first, as in every backward call) and judges its gradients against npattn's there;
"" when they agree, else why not, naming the kind of state it keeps when its gradients show it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from npattn.debug.backward import GRAD_NAMES, backward_variant
from npattn.debug.weights import gradient_array

__all__ = ["second_backward_problem", "second_input"]


def second_input(x: np.ndarray, seed: int) -> np.ndarray:
    """A second input of x's shape, clearly different from it (x + 0.5 * normal noise)."""
    return x + 0.5 * np.random.default_rng(seed + 2).standard_normal(x.shape)


def _close(user: np.ndarray, reference: np.ndarray, atol: float, rtol: float) -> bool:
    return bool(np.max(np.abs(user - reference), initial=0.0) <= atol + rtol * np.max(np.abs(reference), initial=0.0))


def second_backward_problem(
    backward: Callable[..., Mapping[str, Any]],
    x: np.ndarray,
    weights: Mapping[str, np.ndarray],
    G: np.ndarray,
    first: Mapping[str, np.ndarray],
    settings: Mapping[str, Any],
    tolerance: tuple[float, float],
    *,
    name: str,
    seed: int,
) -> str:
    """Why the backward is wrong on a second input (after its first call, whose gradients ``first``
    were right), or "". The user's exceptions are the caller's to report."""
    x2 = second_input(x, seed)
    grads = dict(backward(x2.copy(), {n: w.copy() for n, w in weights.items()}, G.copy()))
    expected = backward_variant(x2, weights, G, **settings)
    wrong = []
    user: dict[str, np.ndarray] = {}
    for tensor in GRAD_NAMES:
        arr, problem = gradient_array(grads.get(tensor), expected[tensor].shape)
        if arr is None or not np.all(np.isfinite(arr)) or not _close(arr, expected[tensor], *tolerance):
            wrong.append(f"d{tensor}" + (f" ({problem})" if problem else ""))
        if arr is not None:
            user[tensor] = arr
    if not wrong:
        return ""
    lead = (
        f"{name}'s backward is right after the first forward but wrong after a forward on a second input of the "
        f"same shape ({', '.join(wrong)} differ from npattn's gradient there)"
    )
    if len(user) == len(GRAD_NAMES):
        if all(_close(user[t], first[t], *tolerance) for t in GRAD_NAMES):
            return (
                f"{lead}: it returns the first input's gradients again, so it keeps the first forward's cache "
                "(store what the backward needs on every forward call)"
            )
        if all(_close(user[t] - first[t], expected[t], *tolerance) for t in _wrong_names(wrong)):
            return (
                f"{lead}: it returns the sum of both calls' gradients, a running sum it never resets "
                "(return this call's gradients; accumulate only into dW_* or .grad, which are zeroed before "
                "each backward)"
            )
    return f"{lead}: it keeps something from an earlier call"


def _wrong_names(wrong: list[str]) -> list[str]:
    """The tensor names of ``wrong`` ("dW_key (shape (2, 3))" -> "W_key")."""
    return [w[1:].split(" ")[0] for w in wrong]
