"""TorchGenerator: PyTorch's CPU random stream, reproduced in NumPy.

After ``torch.manual_seed(seed)``, PyTorch's CPU generator is a Mersenne Twister (MT19937)
seeded exactly like NumPy's legacy ``np.random.RandomState(seed)``. Each float32 element of
``torch.rand`` consumes one 32-bit word ``w`` and equals ``(w & 0xFFFFFF) * 2**-24``; a float64
element consumes two words ``hi, lo`` and equals ``(((hi << 32) | lo) & (2**53 - 1)) * 2**-53``.
``uniform_(a, b)`` maps the same ``u`` to ``u * (b - a) + a`` in the tensor's dtype.
Elements are drawn in row-major order, so a module built after one seed draws its parameters in
construction order from this single stream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Union

import numpy as np

from npattn._checks import check_finite, check_float_dtype, check_nonnegative_int
from npattn.errors import ConfigError

__all__ = ["RNGLike", "TorchGenerator", "linear_init_bounds", "resolve_rng", "uniform_init"]

_F32_MASK = np.uint64((1 << 24) - 1)
_F32_SCALE = np.float32(2.0**-24)
_F64_MASK = np.uint64((1 << 53) - 1)
_F64_SCALE = 2.0**-53


class TorchGenerator:
    """PyTorch-compatible CPU random stream: ``TorchGenerator(123).rand(3, 2)`` equals
    ``torch.manual_seed(123); torch.rand(3, 2)`` bit for bit.

    Raises:
        ConfigError: seed not an integer in [0, 2**32).
    """

    def __init__(self, seed: int = 0) -> None:
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> TorchGenerator:
        """Re-seed the stream (``torch.manual_seed``); returns self."""
        self.seed = _check_seed(seed)
        self._mt = np.random.RandomState(self.seed)
        return self

    def random_words(self, count: int) -> np.ndarray:
        """The next ``count`` raw 32-bit MT19937 outputs, as uint64."""
        words = self._mt.randint(0, 2**32, size=count, dtype=np.uint64)
        return words

    def rand(self, *size: int, dtype: Any = np.float32) -> np.ndarray:
        """Uniform [0, 1) samples of shape ``size``, like ``torch.rand(*size, dtype=dtype)``.

        Raises:
            ConfigError: a size that is not an integer >= 0; a dtype other than float32/float64.
        """
        dims = size[0] if len(size) == 1 and isinstance(size[0], tuple) else size
        shape = tuple(check_nonnegative_int(s, "rand size") for s in dims)
        count = math.prod(shape)
        dtype = check_float_dtype(dtype, "rand dtype")
        if dtype == np.float32:
            words = self.random_words(count)
            return ((words & _F32_MASK).astype(np.float32) * _F32_SCALE).reshape(shape)
        if dtype == np.float64:
            words = self.random_words(2 * count)
            hi, lo = words[0::2], words[1::2]
            bits = ((hi << np.uint64(32)) | lo) & _F64_MASK
            return (bits.astype(np.float64) * _F64_SCALE).reshape(shape)
        raise ConfigError(f"rand supports float32 and float64, got {dtype}")

    def uniform(self, shape: tuple[int, ...], low: float, high: float, dtype: Any = np.float32) -> np.ndarray:
        """Samples like ``torch.empty(shape, dtype=dtype).uniform_(low, high)``.

        PyTorch computes ``u * (high - low) + low`` in the tensor's dtype; its x86-64 AVX2 and
        AVX-512 kernels contract that to one fused multiply-add (rounded once), and so does this.

        Raises:
            ConfigError: bounds not finite or ``low > high`` (PyTorch's uniform_ refuses them too).
        """
        if not check_finite(low, "low") <= check_finite(high, "high"):
            raise ConfigError(f"uniform expects low <= high, got low={low} > high={high}")
        dtype = np.dtype(dtype)
        u = self.rand(*shape, dtype=dtype)
        lo, hi = dtype.type(low), dtype.type(high)
        if dtype == np.float32:
            return _fma_float32(u, hi - lo, lo)
        return _fma_float64(u, hi - lo, lo)

    def get_state(self) -> dict[str, Any]:
        """The full generator state (for checkpoints): plain arrays and ints, no objects."""
        _, key, pos, _, _ = self._mt.get_state(legacy=True)
        return {"seed": self.seed, "key": np.array(key, dtype=np.uint32), "pos": int(pos)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_state`.

        Everything is checked before anything changes, so a refused state leaves the stream as it was.

        Raises:
            ConfigError: not a mapping; a key is missing; ``key`` is not 624 words in [0, 2**32), or
                all zero (MT19937 would draw only zeros); ``seed`` is not a valid seed; ``pos`` is
                outside [0, 624].
        """
        if not isinstance(state, Mapping):
            raise ConfigError(f"generator state must be the dict get_state returns, got {type(state).__name__}")
        missing = [k for k in ("seed", "key", "pos") if k not in state]
        if missing:
            raise ConfigError(f"generator state is missing {missing} (expected the dict get_state returns)")
        key = np.asarray(state["key"])
        if key.shape != (624,) or key.dtype.kind not in "iu":
            raise ConfigError(f"generator state key must be 624 integer words, got shape {key.shape} dtype {key.dtype}")
        if key.min() < 0 or key.max() >= 2**32:
            raise ConfigError(
                f"generator state key words must lie in [0, 2**32) (uint32), got values from {key.min()} to {key.max()}"
            )
        if not key.any():
            raise ConfigError("generator state key is all zeros: MT19937 would draw only zeros")
        seed = _check_seed(state["seed"])
        pos = check_nonnegative_int(state["pos"], "generator state pos")
        if pos > 624:
            raise ConfigError(f"generator state pos must lie in [0, 624], got {pos}")
        self.seed = seed
        self._mt.set_state(("MT19937", key.astype(np.uint32), pos, 0, 0.0))

    def __repr__(self) -> str:
        return f"TorchGenerator(seed={self.seed})"


def _check_seed(seed: Any) -> int:
    """``seed`` as int if it is an integer in [0, 2**32) (MT19937's seeds), else raise ConfigError."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**32:
        raise ConfigError(f"seed must lie in [0, 2**32) like MT19937's, got {seed}")
    return int(seed)


def _fma_float32(a: np.ndarray, b: np.float32, c: np.float32) -> np.ndarray:
    """float32(a * b + c) rounded once, like a float32 fused multiply-add.

    a * b is exact in float64 (24-bit by 24-bit mantissas); the sum is rounded to odd in float64
    (an error-free TwoSum tells the lost bits) so that the final rounding to float32 is correct.
    """
    p = a.astype(np.float64) * np.float64(b)
    c64 = np.float64(c)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    s = np.where((err != 0) & even, np.nextafter(s, s + err), s)
    return s.astype(np.float32)


def _two_product(a: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """p, e with p = fl(a * b) and p + e == a * b exactly (Dekker's algorithm, Veltkamp split)."""

    def split(v: Any) -> tuple[Any, Any]:
        t = 134217729.0 * v  # 2**27 + 1
        high = t - (t - v)
        return high, v - high

    p = a * b
    a_hi, a_lo = split(a)
    b_hi, b_lo = split(b)
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def _fma_float64(a: np.ndarray, b: np.float64, c: np.float64) -> np.ndarray:
    """a * b + c as a float64 fused multiply-add would give it (exact products and sums, one
    final rounding; equal to a true FMA except in ties far below PyTorch's uniform_ spacing)."""
    p, e_prod = _two_product(a, float(b))
    s = p + c
    bb = s - p
    e_sum = (p - (s - bb)) + (c - bb)
    return s + (e_prod + e_sum)


RNGLike = Union[None, int, np.integer, np.random.Generator, TorchGenerator]  # noqa: UP007 (runtime alias on 3.10)


def resolve_rng(rng: RNGLike) -> np.random.Generator | TorchGenerator:
    """Turn the ``rng`` argument every module takes into a generator.

    ``None`` -> a fresh ``numpy.random.default_rng()``; an int -> ``TorchGenerator(int)`` (so
    ``rng=123`` reproduces the book); a ``Generator`` or ``TorchGenerator`` is used as it is.
    """
    if rng is None:
        return np.random.default_rng()
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
    """
    dtype = check_float_dtype(dtype)
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
