"""The chapter-4 layers around attention: Embedding, LayerNorm, GELU and FeedForward.

PyTorch's ``nn.Embedding`` and the book's ``LayerNorm``, ``GELU`` and ``FeedForward`` (section
4.2-4.3), with the book's parameter names and state_dict keys (``weight``; ``scale``, ``shift``;
``layers.0.weight``, ...). Each forward runs a stage pair of ``npattn.nn.functional`` and keeps its
cache; each ``_gradients`` runs the matching backward, and ``Module.backward`` accumulates the
result into the parameters' ``.grad`` after checking every one (frozen parameters get nothing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import as_array, check_allocation, check_float_dtype, check_grad_output, check_positive_int
from npattn.errors import ConfigError, ShapeError
from npattn.nn import functional as F
from npattn.nn.layers import Linear
from npattn.nn.module import Module, Parameter
from npattn.nn.sequential import Sequential
from npattn.random import RNGLike, TorchGenerator, resolve_rng

__all__ = ["GELU", "Embedding", "FeedForward", "LayerNorm", "check_config", "normal_init"]

CONFIG_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")
"""The keys of the book's GPT configuration dict (``GPT_CONFIG_124M``)."""


def check_config(cfg: Any, keys: tuple[str, ...] = CONFIG_KEYS) -> dict[str, Any]:
    """The book's config dict with ``keys`` present and no key outside ``CONFIG_KEYS`` (the book's
    configs never add one, and a misspelt key such as "emb_dimm" would otherwise be ignored
    silently; the optimizers refuse misspelt settings the same way).

    Raises:
        ConfigError: not a mapping, a key missing (names every missing key), or an unknown key
            (names it and the known ones).
    """
    if not hasattr(cfg, "keys") or not hasattr(cfg, "__getitem__"):
        raise ConfigError(f"cfg must be a dict like the book's GPT_CONFIG_124M, got {type(cfg).__name__}")
    unknown = [k for k in cfg.keys() if k not in CONFIG_KEYS]
    if unknown:
        raise ConfigError(
            f"cfg has unknown key(s) {', '.join(map(repr, unknown))}; the book's GPT config has {list(CONFIG_KEYS)}"
        )
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ConfigError(f"cfg is missing {', '.join(map(repr, missing))} (the book's GPT config has {list(keys)})")
    return dict(cfg)


def normal_init(rng: np.random.Generator | TorchGenerator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """N(0, 1) samples of ``shape``, drawn in float32 (PyTorch's default dtype) and cast to ``dtype``;
    with a TorchGenerator, bit-identical to ``torch.empty(shape).normal_()`` after the same seed.

    Raises:
        DTypeError: ``dtype`` is not a floating dtype. ConfigError: a shape larger than memory.
    """
    dtype = check_float_dtype(dtype)
    check_allocation(shape, dtype, "a parameter")
    if isinstance(rng, TorchGenerator):
        values = rng.normal(shape, 0.0, 1.0, np.float32)
    else:
        values = rng.standard_normal(shape, dtype=np.float32)
    return values.astype(dtype, copy=False)


class Embedding(Module):
    """``nn.Embedding(num_embeddings, embedding_dim)``: a trainable lookup table, ``weight`` N(0, 1).

    forward: idx (...) integer ids in [0, num_embeddings) -> (..., embedding_dim).
    backward(grad_output) accumulates the scatter-add of grad_output into ``weight.grad`` and returns
    None: the ids have no gradient.

    Raises:
        ConfigError: sizes not positive integers, a bad rng; an id out of range (forward).
        DTypeError: ids that are not integers (forward).
        ShapeError: a gradient of another shape than the last output (backward).
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int, *, rng: RNGLike = None, dtype: Any = np.float32
    ) -> None:
        super().__init__()
        self.num_embeddings = check_positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = check_positive_int(embedding_dim, "embedding_dim")
        self.weight = Parameter(normal_init(resolve_rng(rng), (self.num_embeddings, self.embedding_dim), dtype))

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"

    def forward(self, idx: Any) -> np.ndarray:
        """idx (...) -> weight[idx] (..., embedding_dim)."""
        out, self._cache = F.embedding_forward(self.weight.data, idx)
        return out

    def _gradients(self, grad_output: Any) -> tuple[None, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (..., embedding_dim) -> None, [(weight, the scatter-add of grad_output)]."""
        cache = self._saved()
        idx = cache[0]
        d_out = check_grad_output(grad_output, (*idx.shape, self.embedding_dim), self.weight.dtype)
        if not self.weight.requires_grad:
            return None, []  # frozen: no (num_embeddings, embedding_dim) scatter-add
        (d_weight,) = F.embedding_backward(d_out, cache)
        return None, [(self.weight, d_weight)]


class LayerNorm(Module):
    """The book's ``LayerNorm(emb_dim)``: ``scale * (x - mean) / sqrt(var + eps) + shift`` over the last
    axis, biased variance, eps = 1e-5; ``scale`` starts at ones, ``shift`` at zeros.

    forward: x (..., emb_dim) -> (..., emb_dim), in the parameters' dtype.

    Raises:
        ConfigError: emb_dim not a positive integer.
        ShapeError, DTypeError: an input whose last axis is not emb_dim, or non-numeric.
    """

    def __init__(self, emb_dim: int, *, dtype: Any = np.float32) -> None:
        super().__init__()
        self.emb_dim = check_positive_int(emb_dim, "emb_dim")
        self.eps = 1e-5
        dtype = check_float_dtype(dtype)
        check_allocation(
            (self.emb_dim,), check_float_dtype(dtype), f"LayerNorm(emb_dim={self.emb_dim}): scale and shift", 2
        )
        self.scale = Parameter(np.ones(self.emb_dim, dtype=dtype))
        self.shift = Parameter(np.zeros(self.emb_dim, dtype=dtype))

    def extra_repr(self) -> str:
        return f"{self.emb_dim}"

    def forward(self, x: Any) -> np.ndarray:
        """x (..., emb_dim) -> (..., emb_dim)."""
        x = _features(x, self.emb_dim, self.scale.dtype)
        out, self._cache = F.layer_norm_forward(x, self.scale.data, self.shift.data, self.eps)
        return out

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (..., emb_dim) -> dx, [(scale, d_scale), (shift, d_shift)]."""
        cache = self._saved()
        d_out = check_grad_output(grad_output, cache[0].shape, self.scale.dtype)
        dx, d_scale, d_shift = F.layer_norm_backward(d_out, cache)
        return dx, [(self.scale, d_scale), (self.shift, d_shift)]


class GELU(Module):
    """The book's ``GELU()``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, elementwise, no parameters.

    forward: x (any shape, floating) -> same shape and dtype.
    """

    def forward(self, x: Any) -> np.ndarray:
        """x -> GELU(x)."""
        x = as_array(x, "x")
        out, self._cache = F.gelu_forward(x)  # the stage keeps its own copy of x
        return out

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (like the output) -> dx, no parameters."""
        cache = self._saved()
        d_out = check_grad_output(grad_output, cache[0].shape, cache[0].dtype)
        (dx,) = F.gelu_backward(d_out, cache)
        return dx, []


class FeedForward(Module):
    """The book's ``FeedForward(cfg)``: Linear(emb_dim, 4 emb_dim), GELU, Linear(4 emb_dim, emb_dim).

    ``layers`` is a ``Sequential`` of the three, so the state_dict keys are the book's ``layers.0.weight``,
    ``layers.0.bias``, ``layers.2.weight``, ``layers.2.bias``. Weights drawn in that order from ``rng``.

    forward: x (..., emb_dim) -> (..., emb_dim).

    Raises:
        ConfigError: cfg without ``emb_dim`` or with a bad one; a bad rng.
    """

    def __init__(self, cfg: dict[str, Any], *, rng: RNGLike = None, dtype: Any = np.float32) -> None:
        super().__init__()
        emb_dim = check_positive_int(check_config(cfg, ("emb_dim",))["emb_dim"], "cfg['emb_dim']")
        self.cfg = {"emb_dim": emb_dim}  # what rebuilds it (a checkpoint's config)
        generator = resolve_rng(rng)
        self.layers = Sequential(
            Linear(emb_dim, 4 * emb_dim, rng=generator, dtype=dtype),
            GELU(),
            Linear(4 * emb_dim, emb_dim, rng=generator, dtype=dtype),
        )

    def forward(self, x: Any) -> np.ndarray:
        """x (..., emb_dim) -> (..., emb_dim)."""
        return self.layers(x)

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (..., emb_dim) -> dx and the layers' gradients, last layer first."""
        return self.layers._gradients(grad_output)


def _features(x: Any, width: int, dtype: np.dtype) -> np.ndarray:
    """x (..., width) converted to ``dtype`` (no copy when it already is).

    Raises:
        ShapeError: a 0-d input or a last axis other than ``width``. DTypeError: non-numeric input.
    """
    arr = as_array(x, "x")
    if arr.ndim == 0 or arr.shape[-1] != width:
        raise ShapeError(f"x: expected shape (..., emb_dim={width}), got shape {arr.shape}")
    return arr.astype(dtype, copy=False)
