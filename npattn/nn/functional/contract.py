"""The contract every stage pair keeps, checked in one place for all of them.

``wrap_stages(globals(), __all__)`` in ``npattn.nn.functional`` (the namespace callers use; the
pipelines inside a stage file call the bare stages on what the checked stages made) and at the end
of ``npattn.nn.losses`` (whose loss pairs keep the same contract) applies two layers to every stage function that takes
arrays (a backward whose gradient is a number, ``d_loss``, gets the second only):

1. ``npattn._checks.stage_arrays``: the array arguments are ndarrays (a torch tensor is taken as
   its ndarray, an ndarray subclass such as np.matrix as its base ndarray; a list, a number or None
   is refused).
2. ``stage_contract`` (this file), on what the first layer lets through:

   - scalar arguments, by name: ``scale`` (softmax: a finite real number, not an array), ``p`` and
     ``dropout_p`` (in [0, 1)), ``eps`` (finite, > 0), ``num_heads`` (a positive integer),
     ``axis`` and ``ignore_index`` (integers), ``record`` (None or callable); a ConfigError names
     the stage, the argument and the value (a string, an array or NaN never reaches NumPy);
   - masks: ``mask``, ``keep`` and ``dropout_keep`` must be bool arrays (an int or float mask
     would mask or scale by its values: ``where(0.5, ...)`` masks everything, a keep of 2 doubles
     a weight), the rule ``kernels.attention`` and ``Dropout.fixed_keep`` apply too;
   - every forward returns its cache as a ``StageCache``: a tuple (unpack it as before) that also
     records which forward made it and the shape of each output;
   - every backward checks its cache: the ``StageCache`` of its own forward, or a plain tuple of
     the same length (a cache built by hand); ``None``, a list, another stage's cache are refused
     with a ConfigError saying what the cache is and which forward's is expected;
   - every backward checks its upstream gradients: real numbers (float or int, as the forwards
     take; complex, bool and object arrays are refused with a DTypeError) and, for a forward's
     cache, exactly the shape of that forward's output (ShapeError; no broadcasting).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from npattn._checks import MASKS, check_positive_int, check_probability, stage_arrays
from npattn.errors import ConfigError, DTypeError, ShapeError

__all__ = [
    "StageCache",
    "check_bool_mask",
    "check_dropout",
    "check_keep_needs_p",
    "stage_cache",
    "stage_contract",
    "wrap_stages",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class StageCache(tuple):
    """A forward's cache: the tuple its backward unpacks, plus ``stage`` (the forward that made it,
    e.g. ``"softmax_forward"``) and ``shapes`` (the shape of each output, in order). Made by
    ``stage_cache``."""

    stage: str = ""
    shapes: tuple[tuple[int, ...], ...] = ()


_new_tuple = tuple.__new__


def stage_cache(items: Any, stage: str, shapes: tuple) -> StageCache:
    """``items`` as a StageCache of ``stage`` whose outputs have ``shapes``."""
    cache = _new_tuple(StageCache, items)
    cache.stage = stage
    cache.shapes = shapes
    return cache


CACHE_LENGTHS = {
    "project": 2, "project_qkv": 2, "bias": 1, "scores": 2, "mask": 1, "softmax": 2, "dropout": 2,
    "context": 2, "split_heads": 1, "merge_heads": 1, "concat": 1, "attention": 6,
    "layer_norm": 3, "gelu": 2, "embedding": 2, "add": 2, "token_cross_entropy": 7,
    "mse_loss": 2, "cross_entropy": 5,  # npattn.nn.losses
}  # fmt: skip
"""How many items each forward's cache holds: what a backward accepts as a cache built by hand."""



def check_bool_mask(mask: np.ndarray, name: str, meaning: str) -> np.ndarray:
    """``mask`` if it is a bool ndarray, else a DTypeError ("``name`` must be a bool array (``meaning``)")."""
    if mask.dtype != bool:
        raise DTypeError(f"{name} must be a bool array ({meaning}), got dtype {mask.dtype}")
    return mask


def check_dropout(keep: np.ndarray | None, p: Any, stage: str) -> None:
    """``p`` in [0, 1), a keep mask wherever p > 0 (without one no dropout would run), and p > 0
    wherever the keep mask drops a weight (``check_keep_needs_p``)."""
    if type(p) is not float or not 0.0 <= p < 1.0:
        p = check_probability(p, f"{stage}: dropout_p")
    if keep is None and p > 0:
        raise ConfigError(
            f"{stage}: dropout_p={p} needs dropout_keep (the bool mask of kept weights, e.g. "
            "TorchGenerator.bernoulli(shape, 1 - p, dtype=bool)); without it no dropout would run. "
            "Pass dropout_p=0.0 for no dropout"
        )
    check_keep_needs_p(keep, p, f"{stage}: dropout_keep", "dropout_p")


def check_keep_needs_p(keep: np.ndarray | None, p: float, keep_name: str, p_name: str) -> None:
    """A keep mask that drops anything needs p > 0: with p = 0 the kept weights would not be scaled
    by 1 / (1 - p), so the mask would zero weights without inverted dropout's rescaling (an all-True
    mask with p = 0 is the identity, and is accepted).

    Raises:
        ConfigError: ``keep`` holds a False while ``p`` is 0.
    """
    if keep is not None and p == 0 and not keep.all():
        dropped = keep.size - int(np.count_nonzero(keep))
        raise ConfigError(
            f"{keep_name} drops {dropped} of {keep.size} weights but {p_name}=0.0: dropout with p = 0 "
            "drops nothing and scales nothing; give the p the mask was drawn with, or no mask"
        )


def _real_scalar(value: Any, name: str) -> float:
    """A real number (Python or NumPy, or a 0-d real array), as float; else ConfigError."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        shape = f" of shape {value.shape}" if isinstance(value, np.ndarray) else ""
        raise ConfigError(f"{name} must be a real number, got {type(value).__name__}{shape} {value!r:.60}")
    return float(value)


def _finite(value: Any, name: str) -> float:
    number = _real_scalar(value, name)
    if not np.isfinite(number):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return number


def _positive_finite(value: Any, name: str) -> float:
    number = _real_scalar(value, name)
    if not 0 < number < np.inf:  # NaN fails too
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def _integer(value: Any, name: str) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")


def _record(value: Any, name: str) -> None:
    if value is not None and not callable(value):
        raise ConfigError(f"{name} must be None or a function record(name, array), got {type(value).__name__}")


def _is_float_in(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: type(v) is float and low <= v < high


_SCALARS: dict[str, tuple[Callable[[Any], bool], Callable[[Any, str], Any]]] = {
    # name: (a fast test that passes the common values, the check that explains a refusal)
    "scale": (lambda v: type(v) is float and v - v == 0.0, _finite),  # softmax's 1/sqrt(k), not layer_norm's array
    "p": (_is_float_in(0.0, 1.0), check_probability),
    "dropout_p": (_is_float_in(0.0, 1.0), check_probability),
    "eps": (lambda v: type(v) is float and 0.0 < v < np.inf, _positive_finite),
    "num_heads": (lambda v: type(v) is int and v >= 1, check_positive_int),
    "axis": (lambda v: type(v) is int, _integer),
    "ignore_index": (lambda v: type(v) is int, _integer),
    "record": (lambda v: v is None, _record),
}


def stage_contract(fn: _F) -> _F:
    """``fn`` (a stage function) with the checks the module docstring lists."""
    stage = fn.__name__
    params = list(inspect.signature(fn).parameters.values())
    positions = {p.name: i for i, p in enumerate(params) if p.kind is p.POSITIONAL_OR_KEYWORD}
    arrays = {p.name for p in params if "ndarray" in str(p.annotation)}
    scalars = [(positions.get(p.name), p.name, *_SCALARS[p.name]) for p in params
               if p.name in _SCALARS and p.name not in arrays]  # fmt: skip
    masks = [(positions.get(p.name), p.name, MASKS[p.name]) for p in params if p.name in MASKS]
    base = stage.rsplit("_", 1)[0]
    backward = stage.endswith("_backward") and "cache" in positions
    forward = stage.endswith("_forward") and base in CACHE_LENGTHS
    grads = [(i, p.name) for i, p in enumerate(params[: positions.get("cache", 0)]) if p.name in arrays]
    source, length = f"{base}_forward", CACHE_LENGTHS.get(base)

    def value(args: tuple, kwargs: dict, i: int | None, name: str) -> Any:
        if i is not None and i < len(args):
            return args[i]
        return kwargs.get(name, inspect.Parameter.empty)

    def check_arguments(args: tuple, kwargs: dict) -> tuple:
        """The arguments checked; a scalar that passed only the full check is replaced by the plain
        Python number it returns (np.float16(0.1) as p would compute 1 - p in float16)."""
        for i, name, fast, check in scalars:
            v = args[i] if i is not None and i < len(args) else kwargs.get(name, inspect.Parameter.empty)
            if v is not inspect.Parameter.empty and not fast(v):
                plain = check(v, f"{stage}: {name}")
                if plain is not None and plain is not v:
                    if i is not None and i < len(args):
                        args = (*args[:i], plain, *args[i + 1 :])
                    else:
                        kwargs[name] = plain
        for i, name, meaning in masks:
            v = args[i] if i is not None and i < len(args) else kwargs.get(name)
            if v is not None and v.dtype != bool:
                check_bool_mask(v, f"{stage}: {name}", meaning)
        return args

    checks_arguments = bool(scalars or masks)
    if backward:
        cache_at = positions["cache"]

        @functools.wraps(fn)
        def checked_backward(*args: Any, **kwargs: Any) -> Any:
            positional = not kwargs and len(args) > cache_at
            cache = args[cache_at] if positional else value(args, kwargs, cache_at, "cache")
            shapes = None
            if type(cache) is StageCache and cache.stage == source:
                shapes = cache.shapes
            elif type(cache) is StageCache or not isinstance(cache, tuple) or len(cache) != length:
                raise ConfigError(f"{stage}: cache must be the cache {source} returned, got {_describe(cache, length)}")
            for j, (i, name) in enumerate(grads):
                d = args[i] if positional else value(args, kwargs, i, name)
                if not isinstance(d, np.ndarray):
                    continue  # missing: Python's own TypeError follows
                if d.dtype.kind not in "fiu":
                    raise DTypeError(f"{stage}: {name} must hold real numbers (float or int), got dtype {d.dtype}")
                if shapes is not None and d.shape != shapes[j]:
                    raise ShapeError(
                        f"{stage}: expected a gradient of shape {shapes[j]} (the forward output's), got {d.shape}"
                    )
            if checks_arguments:
                args = check_arguments(args, kwargs)
            return fn(*args, **kwargs)

        return checked_backward  # type: ignore[return-value]

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if checks_arguments:
            args = check_arguments(args, kwargs)
        if not forward:
            return fn(*args, **kwargs)
        out, cache = fn(*args, **kwargs)
        shapes = (out.shape,) if type(out) is not tuple else tuple(o.shape for o in out)
        return out, stage_cache(cache, stage, shapes)

    return checked  # type: ignore[return-value]


def _describe(cache: Any, length: int | None) -> str:
    """What a refused cache is, in a few words (``length``: how many items the expected one holds)."""
    if isinstance(cache, StageCache):
        return f"the cache {cache.stage} returned (pass each cache to the backward of the forward that made it)"
    if isinstance(cache, tuple):
        return f"a tuple of length {len(cache)} (that forward's cache holds {length} items)"
    return f"{type(cache).__name__} {cache!r:.40}"


def wrap_stages(namespace: dict[str, Any], names: list[str]) -> None:
    """Apply ``stage_contract``, then ``stage_arrays``, to every stage function ``names`` lists in
    ``namespace`` (a module's globals) that takes arrays: arrays are converted first, then checked;
    ``stage_contract`` alone to a backward that takes no array (its cache is checked)."""
    for name in names:
        fn = namespace[name]
        if not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters
        if any("ndarray" in str(p.annotation) for p in params.values()):
            namespace[name] = stage_arrays(stage_contract(fn))
        elif name.endswith("_backward") and "cache" in params:  # d_loss (a number) is its own check
            namespace[name] = stage_contract(fn)

