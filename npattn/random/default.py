"""The default generator (``torch.default_generator``) and the ``rng`` argument every module takes.

``npattn.manual_seed(seed)`` re-seeds ``npattn.default_generator`` like ``torch.manual_seed``;
modules built without ``rng`` draw from it, continuing its stream, so
``npattn.manual_seed(123); a = X(...); b = Y(...)`` gives torch's weights for both. Until it is
seeded, it starts from a non-deterministic seed, as torch's does.
"""

from __future__ import annotations

import math
import secrets
from typing import Any, Union

import numpy as np

from npattn._checks import check_allocation, check_float_dtype
from npattn.errors import ConfigError
from npattn.random.generator import TorchGenerator

__all__ = [
    "RNGLike",
    "default_generator",
    "initial_seed",
    "linear_init_bounds",
    "manual_seed",
    "rand",
    "randn",
    "resolve_rng",
    "seed",
    "uniform_init",
]

default_generator = TorchGenerator(secrets.randbits(64))


def manual_seed(seed: int) -> TorchGenerator:
    """Seed the default generator (``torch.manual_seed``): any int in [-2**63, 2**64); returns it.

    Raises:
        ConfigError: a seed that is not an int in [-2**63, 2**64).
    """
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator with a non-deterministic seed and return it (``torch.seed``)."""
    return default_generator.seed()


def _generator(generator: TorchGenerator | None, what: str) -> TorchGenerator:
    """torch's ``generator=`` keyword: None -> the default generator, else a TorchGenerator."""
    if generator is None:
        return default_generator
    if not isinstance(generator, TorchGenerator):
        raise ConfigError(
            f"{what} generator must be an npattn.TorchGenerator or None (the default generator), "
            f"got {type(generator).__name__}"
        )
    return generator


def rand(*size: int, generator: TorchGenerator | None = None, dtype: Any = np.float32) -> np.ndarray:
    """``torch.rand(*size, generator=None, dtype=...)``: uniform [0, 1) samples, from ``generator``
    or else the default generator.

    Raises:
        ConfigError: a generator that is not a TorchGenerator; a bad size or dtype (as
            ``TorchGenerator.rand``).
    """
    return _generator(generator, "rand").rand(*size, dtype=dtype)


def randn(*size: int, generator: TorchGenerator | None = None, dtype: Any = np.float32) -> np.ndarray:
    """``torch.randn(*size, generator=None, dtype=...)``: standard normal samples, from
    ``generator`` or else the default generator.

    Raises:
        ConfigError: a generator that is not a TorchGenerator; a bad size or dtype (as
            ``TorchGenerator.randn``).
    """
    return _generator(generator, "randn").randn(*size, dtype=dtype)


def initial_seed() -> int:
    """The default generator's seed, as ``torch.initial_seed()`` reports it (in [0, 2**64))."""
    return default_generator.initial_seed()


RNGLike = Union[None, int, np.integer, np.random.Generator, TorchGenerator]  # noqa: UP007 (runtime alias on 3.10)


def resolve_rng(rng: RNGLike) -> np.random.Generator | TorchGenerator:
    """Turn the ``rng`` argument every module takes into a generator.

    ``None`` -> ``npattn.default_generator`` (continuing its stream, like a torch module built
    after ``torch.manual_seed``); an int -> a fresh ``TorchGenerator(int)`` (so ``rng=123``
    reproduces ``torch.manual_seed(123)`` followed by that one module); a ``Generator`` or
    ``TorchGenerator`` is used as it is.

    Raises:
        ConfigError: anything else, or an int seed outside [-2**63, 2**64).
    """
    if rng is None:
        return default_generator
    if isinstance(rng, (TorchGenerator, np.random.Generator)):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return TorchGenerator(int(rng))
    raise ConfigError(
        f"rng must be None, an int seed, a numpy.random.Generator or an npattn.TorchGenerator, got {type(rng).__name__}"
    )


def uniform_init(
    rng: np.random.Generator | TorchGenerator, shape: tuple[int, ...], low: float, high: float, dtype: Any
) -> np.ndarray:
    """Draw U(low, high) of ``shape`` from ``rng`` in float32 (PyTorch's default dtype), then cast
    to ``dtype``; with a TorchGenerator the float32 values are bit-identical to PyTorch's.

    Raises:
        DTypeError: ``dtype`` is not a floating dtype (every module's ``dtype`` argument lands here).
        ConfigError: a shape larger than this machine's memory (every module's size arguments land here).
    """
    dtype = check_float_dtype(dtype)
    check_allocation(shape, dtype, "a parameter")
    if isinstance(rng, TorchGenerator):
        values = rng.uniform(shape, low, high, np.float32)
    else:
        values = rng.uniform(low, high, size=shape).astype(np.float32)
    return values.astype(dtype)


def linear_init_bounds(in_features: int) -> tuple[float, float]:
    """The bounds ``nn.Linear.reset_parameters`` uses, computed as PyTorch does (weight, bias).

    weight: kaiming_uniform_(a=sqrt(5)) -> sqrt(3) * gain / sqrt(fan_in) with gain = sqrt(2 / (1 + a**2));
    bias: 1 / sqrt(fan_in). Both are 1 / sqrt(in_features) up to rounding; the rounding matters for
    bit-identical weights.
    """
    if in_features == 0:
        return 0.0, 0.0
    a = math.sqrt(5)
    gain = math.sqrt(2.0 / (1 + a**2))
    std = gain / math.sqrt(in_features)
    return math.sqrt(3.0) * std, 1 / math.sqrt(in_features)
