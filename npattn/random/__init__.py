"""PyTorch's CPU random streams, reproduced in NumPy, and the default generator.

- :mod:`npattn.random.generator`: ``TorchGenerator`` (``rand``, ``uniform``, ``normal``/``randn``,
  ``bernoulli``), bit for bit equal to ``torch.Generator`` on CPU.
- :mod:`npattn.random.boxmuller`, :mod:`npattn.random.cephes`, :mod:`npattn.random.fma`: the
  Box-Muller layouts of ``normal_``, PyTorch's AVX2 float32 log/sin/cos, fused multiply-adds.
- :mod:`npattn.random.default`: ``default_generator``, ``manual_seed``, ``initial_seed``,
  ``seed``, ``rand``, ``randn`` and the ``rng`` argument of every module.
"""

from npattn.random.default import (
    RNGLike,
    default_generator,
    initial_seed,
    linear_init_bounds,
    manual_seed,
    rand,
    randn,
    resolve_rng,
    seed,
    uniform_init,
)
from npattn.random.generator import TorchGenerator, torch_seed

__all__ = [
    "RNGLike",
    "TorchGenerator",
    "default_generator",
    "initial_seed",
    "linear_init_bounds",
    "manual_seed",
    "rand",
    "randn",
    "resolve_rng",
    "seed",
    "torch_seed",
    "uniform_init",
]
