"""The constructor arguments of a module, as a checkpoint's index records them (``config``), so
that ``type(module)(**config)`` rebuilds a module its state dict loads into."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["constructor_config"]


def constructor_config(module: Any) -> dict[str, Any]:
    """The constructor arguments of ``module`` (those before the keyword-only rng, dtype, impl), so
    ``type(module)(**config)`` builds a module its state dict loads into: each is read from the
    attribute of its name (a Dropout as its p, a Linear's bias as whether it has one), a
    MultiHeadAttentionWrapper's from its first head. Arguments it cannot read are left out."""
    config: dict[str, Any] = {}
    for p in list(inspect.signature(type(module).__init__).parameters.values())[1:]:
        if p.kind is not p.POSITIONAL_OR_KEYWORD:
            continue
        holder = module if hasattr(module, p.name) else getattr(module, "heads", [None])[0]
        if not hasattr(holder, p.name):
            continue
        value = getattr(holder, p.name)
        if p.name == "bias" and not isinstance(value, bool):
            value = value is not None
        value = getattr(value, "p", value)  # a Dropout module: its probability
        if isinstance(value, (bool, int, float, str)) or (isinstance(value, dict) and p.name == "cfg"):
            config[p.name] = dict(value) if isinstance(value, dict) else value
    return config
