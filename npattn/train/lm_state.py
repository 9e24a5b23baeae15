"""What a language-model run's checkpoint holds besides its settings and history, read back with
checks: the model's and the optimizer's arrays in the run's dtype, and the random streams dropout
draws from (so a resumed run draws the masks an uninterrupted one would).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from npattn.errors import CheckpointError, NpattnError
from npattn.nn.gpt import GPTModel
from npattn.random import TorchGenerator

__all__ = ["check_stored_dtypes", "generators", "rng_state", "set_rng_state"]


def check_stored_dtypes(saved: dict[str, Any], model: GPTModel, dtype: str, name: str) -> None:
    """The stored weights and optimizer buffers have the dtype the settings name (loading would
    silently convert them: an edited dtype setting would resume another run)."""
    weights, opt = saved["model"], saved["optimizer"]
    params = dict(model.named_parameters())
    arrays = [(k, v) for k, v in weights.items() if k in params] if isinstance(weights, Mapping) else []
    state = opt.get("state") if isinstance(opt, Mapping) else None
    for key, buffers in state.items() if isinstance(state, Mapping) else ():
        if isinstance(buffers, Mapping):
            arrays += [(f"optimizer state {key} {k!r}", v) for k, v in buffers.items() if k != "step"]
    for key, value in arrays:
        if isinstance(value, np.ndarray) and value.dtype != np.dtype(dtype):
            raise CheckpointError(
                f"{name!r}: {key} has dtype {value.dtype}, expected {dtype} (the run's dtype setting); "
                "the stored model and optimizer arrays must have the dtype the settings name"
            )


def generators(model: Any) -> list[Any]:
    """The distinct random generators the model's dropout layers draw from, in module order."""
    found: dict[int, Any] = {}
    for module in model.modules():
        rng = getattr(module, "rng", None)
        if rng is not None:
            found.setdefault(id(rng), rng)
    return list(found.values())


def rng_state(model: Any) -> list[Any]:
    """The state of every generator dropout draws from (plain values), so a resumed run draws the
    same dropout masks as an uninterrupted one."""
    return [
        {"numpy": json.dumps(rng.bit_generator.state)} if isinstance(rng, np.random.Generator) else rng.get_state()
        for rng in generators(model)
    ]


def set_rng_state(model: Any, states: Any, name: str = "the checkpoint") -> None:
    found = generators(model)
    problem = f"{name!r}: its dropout_rng entry does not fit this model"
    if not isinstance(states, list) or len(states) != len(found):
        raise CheckpointError(problem)
    for rng, state in zip(found, states):
        seed = state.get("seed") if isinstance(state, Mapping) and isinstance(rng, TorchGenerator) else None
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and int(seed) != rng.initial_seed():
            raise CheckpointError(
                f"{name!r}: its dropout_rng seed {int(seed)} is not the seed the run's settings give "
                f"({rng.initial_seed()}); the seed setting or the dropout state was edited"
            )
        try:
            if isinstance(rng, np.random.Generator):
                rng.bit_generator.state = json.loads(str(state["numpy"]))
            else:
                rng.set_state(state)
        except (NpattnError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{problem} ({type(exc).__name__}: {exc})") from None
