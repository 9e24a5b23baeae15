"""TorchGenerator: PyTorch's CPU random stream (``torch.Generator``), reproduced in NumPy.

After ``torch.manual_seed(seed)``, PyTorch's CPU generator is a Mersenne Twister (MT19937)
seeded with the seed's low 32 bits, exactly like NumPy's legacy ``np.random.RandomState``.
Every distribution reads the same stream of 32-bit words ``w``:

- ``rand``/``uniform_`` float32: one word per element, ``u = (w & (2**24 - 1)) * 2**-24``;
  float64: two words ``hi, lo`` per element, ``u = (((hi << 32) | lo) & (2**53 - 1)) * 2**-53``.
  ``uniform_(a, b)`` is ``u * (b - a) + a`` in the dtype, fused (rounded once).
- ``bernoulli_(p)``: one float64 ``u`` per element (two words, whatever the dtype); the element
  is 1 when ``u < p``. Measured against torch 2.13 at every size (no other path above 800).
  Computed on the words as integers (:func:`uniform53_below`), never building ``u``.
- ``normal_``/``randn``: the Box-Muller layouts of :mod:`npattn.random.boxmuller`.

Elements are drawn in row-major order, so a module built after one seed draws its parameters
in construction order from this single stream.
"""

from __future__ import annotations

import math
import numbers
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn._checks import check_bytes, check_finite, check_float_dtype, check_nonnegative_int
from npattn.errors import ConfigError, DTypeError
from npattn.random.boxmuller import box_muller_pair, normal_blocks
from npattn.random.fma import fma_float32, fma_float64

__all__ = ["TORCH_DEFAULT_SEED", "TorchGenerator", "torch_seed", "uniform53_below"]

TORCH_DEFAULT_SEED = 67280421310721
"""The seed of a ``torch.Generator()`` made without one (``torch.Generator().initial_seed()``,
c10's ``default_rng_seed_val``): ``TorchGenerator()`` starts from it too."""

_STATE_KEYS = ("seed", "key", "pos", "normal_cache")

_F32_MASK = np.uint32((1 << 24) - 1)
_F32_SCALE = np.float32(2.0**-24)
_F64_MASK = np.uint64((1 << 53) - 1)
_F64_SCALE = 2.0**-53
_BLOCK = 16  # normal_ switches to the 16-element layout from this size on
_HI21_MASK = np.uint32((1 << 21) - 1)  # the high word's bits that survive the 53-bit mask


def torch_seed(seed: Any) -> int:
    """The unsigned 64-bit seed torch keeps for a Python int seed: any int in [-2**63, 2**64),
    negative ones taken modulo 2**64 (so -1 -> 2**64 - 1), like ``torch.manual_seed``.

    Raises:
        ConfigError: not an int (bool included), or outside [-2**63, 2**64) (torch overflows too).
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    if not -(2**63) <= seed < 2**64:
        raise ConfigError(f"seed must lie in [-2**63, 2**64) like torch.manual_seed's, got {seed}")
    return seed % 2**64


def _shape(size: tuple[Any, ...], what: str, bytes_per_element: int) -> tuple[int, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` both mean shape (2, 3); ``f(3)`` means (3,).

    Samples of ``bytes_per_element`` bytes each that need more than this machine's memory are
    refused before anything is drawn (as every array npattn allocates, ``check_allocation``).
    """
    dims = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    shape = tuple(check_nonnegative_int(s, what) for s in dims)
    if math.prod(shape) >= 2**48 or any(s >= 2**48 for s in shape):  # NumPy would fail cryptically
        raise ConfigError(f"{what.split()[0]} of {math.prod(shape):,} elements is too large (shape {shape})")
    check_bytes(math.prod(shape) * bytes_per_element, f"{what.split()[0]} of shape {shape}")
    return shape


def uniform53_below(words: np.ndarray, p: float) -> np.ndarray:
    """``u < p`` for the float64 uniforms ``u`` of ``words`` (uint32 pairs ``hi, lo`` -> (len // 2,) bool).

    ``u = bits * 2**-53`` with ``bits = (hi & (2**21 - 1)) * 2**32 + lo`` is exact, and so is
    ``p * 2**53`` (a power of two only moves the exponent), so ``u < p`` exactly when the integer
    ``bits < ceil(p * 2**53) = t_hi * 2**32 + t_lo``: ``hi' < t_hi``, or ``hi' == t_hi`` and
    ``lo < t_lo`` (a tie of the high words, rare: about one element in 2**21).
    """
    t_hi, t_lo = divmod(math.ceil(p * 2.0**53), 2**32)
    hi = words[0::2] & _HI21_MASK
    below = hi < t_hi
    tie = np.flatnonzero(hi == t_hi)
    below[tie] = words[1::2][tie] < t_lo
    return below


def _stream_dtype(dtype: Any, what: str) -> np.dtype:
    """float32 or float64, the dtypes torch's CPU stream is reproduced for."""
    dtype = check_float_dtype(dtype, what)
    if dtype not in (np.float32, np.float64):
        raise ConfigError(f"{what.split()[0]} supports float32 and float64, got {dtype}")
    return dtype


class TorchGenerator:
    """PyTorch-compatible CPU random stream: ``TorchGenerator(123).rand(3, 2)`` equals
    ``torch.manual_seed(123); torch.rand(3, 2)`` bit for bit, and so do ``uniform``,
    ``normal``/``randn`` and ``bernoulli`` (float32 and float64). Without a seed it starts
    from torch's default, ``TORCH_DEFAULT_SEED`` (67280421310721), as ``torch.Generator()`` does.

    Raises:
        ConfigError: a seed that is not an int in [-2**63, 2**64).
    """

    def __init__(self, seed: int = TORCH_DEFAULT_SEED) -> None:
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> TorchGenerator:
        """Re-seed the stream (``torch.manual_seed``/``Generator.manual_seed``); returns self.
        Also forgets a cached normal sample, as torch does."""
        self._seed = torch_seed(seed)
        self._mt = np.random.RandomState(self._seed & 0xFFFFFFFF)
        self._normal_cache: float | None = None
        return self

    def initial_seed(self) -> int:
        """The seed in use, as torch reports it (an int in [0, 2**64))."""
        return self._seed

    def seed(self) -> int:
        """Re-seed with a non-deterministic seed and return it (``Generator.seed()``)."""
        value = secrets.randbits(64)
        self.manual_seed(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "seed":  # torch: "attribute 'seed' of 'torch._C.Generator' objects is not writable"
            raise AttributeError(
                "TorchGenerator.seed is a method (as torch.Generator.seed): re-seed with manual_seed(seed)"
            )
        object.__setattr__(self, name, value)

    def random_words(self, count: int) -> np.ndarray:
        """The next ``count`` raw 32-bit MT19937 outputs, as uint32."""
        return self._mt.randint(0, 2**32, size=count, dtype=np.uint32)

    def _uniform_float32(self, count: int) -> np.ndarray:
        return (self.random_words(count) & _F32_MASK).astype(np.float32) * _F32_SCALE

    def _uniform_float64(self, count: int) -> np.ndarray:
        words = self.random_words(2 * count).astype(np.uint64)
        bits = ((words[0::2] << np.uint64(32)) | words[1::2]) & _F64_MASK
        return bits.astype(np.float64) * _F64_SCALE

    def rand(self, *size: int, dtype: Any = np.float32) -> np.ndarray:
        """Uniform [0, 1) samples of shape ``size``, like ``torch.rand(*size, dtype=dtype)``.

        Raises:
            ConfigError: a size that is not an integer >= 0, or a draw larger than this machine's
                memory; a dtype other than float32/float64.
        """
        dtype = _stream_dtype(dtype, "rand dtype")
        shape = _shape(size, "rand size", dtype.itemsize)
        count = math.prod(shape)
        u = self._uniform_float32(count) if dtype == np.float32 else self._uniform_float64(count)
        return u.reshape(shape)

    def uniform(self, shape: tuple[int, ...], low: float, high: float, dtype: Any = np.float32) -> np.ndarray:
        """Samples like ``torch.empty(shape, dtype=dtype).uniform_(low, high)``.

        PyTorch computes ``u * (high - low) + low`` in the tensor's dtype; its x86-64 AVX2 and
        AVX-512 kernels contract that to one fused multiply-add (rounded once), and so does this.
        A sample that rounds up to ``high`` (ranges a few ulps wide) is ``low``, as in PyTorch,
        so every sample lies in [low, high).

        ``shape`` is a tuple or an int (``uniform(3, 0, 1)`` draws 3 samples).

        Raises:
            ConfigError: bounds not finite or ``low > high``, or bounds or ``high - low`` beyond
                the dtype's range (float32 overflows at 3.4e38; PyTorch's uniform_ refuses all of
                these too); a bad shape or dtype.
        """
        if not check_finite(low, "low") <= check_finite(high, "high"):
            raise ConfigError(f"uniform expects low <= high, got low={low} > high={high}")
        dtype = _stream_dtype(dtype, "uniform dtype")
        shape = _shape((shape,), "uniform shape", dtype.itemsize)
        with np.errstate(over="ignore"):
            lo, hi = dtype.type(low), dtype.type(high)
            span = hi - lo
        if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(span)):
            raise ConfigError(
                f"uniform expects low, high and high - low to be finite in {dtype}, got low={low}, high={high}"
            )
        u = self.rand(*shape, dtype=dtype)
        fma = fma_float32 if dtype == np.float32 else fma_float64
        out = fma(u, span, lo).reshape(u.shape)
        # u < 1, but u * span + low rounds up to high in ranges a few ulps wide: torch keeps such a
        # sample in [low, high) by giving low instead
        out[out >= hi] = lo
        return out

    def normal(
        self, shape: tuple[int, ...], mean: float = 0.0, std: float = 1.0, dtype: Any = np.float32
    ) -> np.ndarray:
        """Samples like ``torch.empty(shape, dtype=dtype).normal_(mean, std)`` (contiguous).

        Below 16 elements each element takes the scalar Box-Muller path (two float64 uniforms
        per pair, the second value cached for the next element, across calls); from 16 on, the
        16-element layout (see :mod:`npattn.random.boxmuller`), which leaves the cache alone.

        Raises:
            ConfigError: a bad shape or dtype; mean or std not finite, or std < 0 (torch refuses it).
        """
        dtype = _stream_dtype(dtype, "normal dtype")
        shape = _shape((shape,), "normal shape", dtype.itemsize)
        mean, std = check_finite(mean, "mean"), check_finite(std, "std")
        if std < 0:
            raise ConfigError(f"normal expects std >= 0, got std={std}")
        count = math.prod(shape)
        if count < _BLOCK:
            values = [self._normal_scalar(mean, std) for _ in range(count)]
            return np.array(values, dtype=np.float64).astype(dtype).reshape(shape)
        uniform = self._uniform_float32 if dtype == np.float32 else self._uniform_float64
        u = uniform(count)
        full = count - count % _BLOCK
        out = np.empty(count, dtype=dtype)
        out[:full] = normal_blocks(u[:full], mean, std)
        if full < count:  # 16 fresh uniforms replace the last 16 elements
            out[count - _BLOCK :] = normal_blocks(uniform(_BLOCK), mean, std)
        return out.reshape(shape)

    def randn(self, *size: int, dtype: Any = np.float32) -> np.ndarray:
        """Standard normal samples of shape ``size``, like ``torch.randn(*size, dtype=dtype)``."""
        dtype = _stream_dtype(dtype, "randn dtype")  # named as randn's; normal checks the bytes
        return self.normal(_shape(size, "randn size", dtype.itemsize), 0.0, 1.0, dtype)

    def _normal_scalar(self, mean: float, std: float) -> float:
        """One element of ``normal_distribution<double>``: the cached value, else a new pair."""
        if self._normal_cache is not None:
            z, self._normal_cache = self._normal_cache, None
        else:
            u1, u2 = self._uniform_float64(2)
            z, self._normal_cache = box_muller_pair(float(u1), float(u2))
        return float(fma_float64(z, std, mean))  # z * std + mean, fused as torch compiles it

    def bernoulli(self, shape: tuple[int, ...], p: float, dtype: Any = np.float32) -> np.ndarray:
        """Samples like ``torch.empty(shape, dtype=dtype).bernoulli_(p)``: 1 where a float64
        uniform is < p, else 0 (two words per element, whatever the dtype; bool gives a mask).

        Raises:
            ConfigError: p outside [0, 1]; a bad shape.
            DTypeError: dtype is not a NumPy dtype.
        """
        shape = _shape((shape,), "bernoulli shape", 1)  # at least a bool per element
        if isinstance(p, np.ndarray) and p.ndim == 0 and p.dtype.kind in "iuf":  # a 0-d array: the number it holds
            p = p[()]
        if not 0.0 <= check_finite(p, "p") <= 1.0:
            raise ConfigError(f"bernoulli expects 0 <= p <= 1, got p={p}")
        try:
            out_dtype = np.dtype(dtype)
        except TypeError:
            message = f"bernoulli dtype must be a NumPy dtype such as np.float32 or bool, got {dtype!r}"
            raise DTypeError(message) from None
        keep = uniform53_below(self.random_words(2 * math.prod(shape)), float(p))
        return keep.reshape(shape).astype(out_dtype, copy=False)

    def get_state(self) -> dict[str, Any]:
        """The full generator state (for checkpoints): plain arrays and numbers, no objects.
        ``normal_cache`` is NaN when no normal sample is cached."""
        _, key, pos, _, _ = self._mt.get_state(legacy=True)
        cache = math.nan if self._normal_cache is None else self._normal_cache
        return {"seed": self._seed, "key": np.array(key, dtype=np.uint32), "pos": int(pos), "normal_cache": cache}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_state` (``normal_cache`` may be absent: none cached).

        Everything is checked before anything changes, so a refused state leaves the stream as it was.

        Raises:
            ConfigError: not a mapping; a key is missing or unknown (a misspelt one would be
                ignored); ``key`` is not 624 words in [0, 2**32), or
                all zero (MT19937 would draw only zeros); ``seed`` is not a valid seed; ``pos`` is
                outside [0, 624]; ``normal_cache`` is not a number.
        """
        if not isinstance(state, Mapping):
            raise ConfigError(f"generator state must be the dict get_state returns, got {type(state).__name__}")
        missing = [k for k in ("seed", "key", "pos") if k not in state]
        if missing:
            raise ConfigError(f"generator state is missing {missing} (expected the dict get_state returns)")
        unknown = [k for k in state if k not in _STATE_KEYS]
        if unknown:
            raise ConfigError(f"generator state has unknown key(s) {unknown}; get_state's keys are {list(_STATE_KEYS)}")
        key = np.asarray(state["key"])
        if key.shape != (624,) or key.dtype.kind not in "iu":
            raise ConfigError(f"generator state key must be 624 integer words, got shape {key.shape} dtype {key.dtype}")
        if key.min() < 0 or key.max() >= 2**32:
            raise ConfigError(
                f"generator state key words must lie in [0, 2**32) (uint32), got values from {key.min()} to {key.max()}"
            )
        if not key.any():
            raise ConfigError("generator state key is all zeros: MT19937 would draw only zeros")
        pos = check_nonnegative_int(state["pos"], "generator state pos")
        if pos > 624:
            raise ConfigError(f"generator state pos must lie in [0, 624], got {pos}")
        cache = state.get("normal_cache", math.nan)
        if isinstance(cache, (bool, np.bool_)) or not isinstance(cache, numbers.Real):
            raise ConfigError(f"generator state normal_cache must be a number (NaN: none cached), got {cache!r}")
        seed = torch_seed(state["seed"])
        self._seed = seed
        self._mt.set_state(("MT19937", key.astype(np.uint32), pos, 0, 0.0))
        self._normal_cache = None if math.isnan(float(cache)) else float(cache)

    def __repr__(self) -> str:
        return f"TorchGenerator(seed={self._seed})"
