"""trace(module, x): run a forward pass and record every stage (name, formula, input shapes, output
shape, the array) of the module and of its sub-modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from npattn import _html
from npattn.debug.formulas import LATEST_OF, format_shape, format_table, formula_of, kind_of
from npattn.debug.weights import weights_of
from npattn.errors import ConfigError
from npattn.nn.module import Module

__all__ = ["Stage", "Trace", "trace"]


@dataclass
class Stage:
    """One recorded stage: ``module`` is the dotted sub-module name ("" for the traced module)."""

    name: str
    module: str
    formula: str
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    array: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def qualname(self) -> str:
        """``heads.0.queries`` for a sub-module's stage, ``queries`` for the traced module's own."""
        return f"{self.module}.{self.name}" if self.module else self.name


@dataclass
class Trace:
    """Every stage of one forward pass, in the order they ran, and the output.

    ``trace["heads.1.attn_weights"]`` is the array of the stage with that qualified name;
    ``trace["attn_weights"]``, a plain name, works when one sub-module recorded it (several heads or
    blocks each record one: then a ConfigError lists their qualified names). ``trace.shapes`` maps
    qualified names to shapes.
    """

    stages: list[Stage]
    output: Any
    module_name: str = ""

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def stage(self, name: str) -> Stage:
        """The first stage whose qualified name is ``name``, else the stage whose plain name is.

        Raises:
            ConfigError: several sub-modules recorded a stage of that plain name (which one is meant?).
            KeyError: no stage of that name.
        """
        for stage in self.stages:
            if stage.qualname == name:
                return stage
        matches = [s for s in self.stages if s.name == name]
        owners = list(dict.fromkeys(s.qualname for s in matches))
        if len(owners) > 1:
            raise ConfigError(
                f"trace[{name!r}] is ambiguous: {len(owners)} recorded stages are named {name!r} "
                f"({', '.join(owners)}); ask for one of them by its full name"
            )
        if matches:
            return matches[0]
        raise KeyError(f"no stage named {name!r}; recorded: {', '.join(s.qualname for s in self.stages)}")

    def __getitem__(self, name: str) -> np.ndarray:
        return self.stage(name).array

    def __contains__(self, name: object) -> bool:
        return any(name in (s.qualname, s.name) for s in self.stages)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {s.qualname: s.shape for s in self.stages}

    def __str__(self) -> str:
        rows = []
        for s in self.stages:
            inputs = ", ".join(f"{name} {format_shape(shape)}" for name, shape in s.input_shapes)
            rows.append([s.qualname, s.formula, inputs, format_shape(s.shape)])
        head = f"trace of {self.module_name}" if self.module_name else "trace"
        return "\n".join([head, *format_table(["stage", "formula", "inputs", "shape"], rows)])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        """The stage table, and the attention weights (first sequence, first head) as a heatmap."""
        rows = [
            [s.qualname, s.formula, ", ".join(f"{n} {format_shape(sh)}" for n, sh in s.input_shapes),
             format_shape(s.shape)]
            for s in self.stages
        ]
        head = f"trace of {self.module_name}" if self.module_name else "trace"
        parts = [_html.table(["stage", "formula", "inputs", "shape"], rows, caption=head)]
        weights = [s for s in self.stages if s.name == "attn_weights"]
        if weights:
            stage = weights[0]
            where = " (first sequence, first head)" if stage.array.ndim > 2 else ""
            parts.append(_html.heatmap(stage.array, caption=f"{stage.qualname}{where}: row = query, column = key"))
        return _html.wrap(*parts)


def _weight_shape(module: Module, name: str) -> tuple[int, ...] | None:
    """Shape of ``module.<name>`` as the (d_in, d_out) matrix the formula multiplies by, if it exists."""
    if not name.isidentifier():
        return None
    try:
        return weights_of(module, names=(name,))[name].shape
    except ConfigError:
        return None


def _input_shapes(
    module: Module, prefix: str, stages: list[Stage], reads: tuple[str, ...]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The shapes of what a stage of ``module`` (named ``prefix``) reads: its earlier stages (named
    relative to ``prefix``; a pattern such as "heads.*.context_vec" takes every match), or its weights."""
    own = [(s.qualname[len(prefix) + 1 :] if prefix else s.qualname, s) for s in stages]
    own = [(rel, s) for rel, s in own if not prefix or s.qualname.startswith(prefix + ".")]
    found: list[tuple[str, tuple[int, ...]]] = []
    for want in reads:
        candidates = LATEST_OF.get(want, (want,))
        earlier = [(rel, s.shape) for rel, s in own if any(fnmatchcase(rel, c) for c in candidates)]
        if earlier:
            found += earlier if "*" in want else earlier[-1:]
        else:
            shape = _weight_shape(module, want)
            if shape is not None:
                found.append((want, shape))
    return tuple(found)


def trace(module: Module, x: Any, *args: Any, **kwargs: Any) -> Trace:
    """Run ``module(x, *args, **kwargs)`` recording every stage of it and of its sub-modules.

    Installs a recorder on every module of ``module.modules()``, runs forward, and restores the
    previous recorders even when forward raises. Stage names are whatever the forward passes
    record; a dotted name ("heads.0.queries", as MultiHeadAttentionWrapper passes on its heads'
    stages) belongs to that sub-module. The known names ("x", "queries", ..., "context_vec",
    "merged_heads", "out_proj") get their formula, as the module's kind of attention computes it.

    Raises:
        ConfigError: ``module`` is not an npattn Module.
        Whatever the forward raises (after restoring the recorders).
    """
    if not isinstance(module, Module):
        raise ConfigError(f"trace expects an npattn.Module, got {type(module).__name__}")
    stages: list[Stage] = []
    named = dict(module.named_modules())
    saved = [(m, m._recorder) for m in module.modules()]

    def recorder_for(prefix: str) -> Callable[[str, np.ndarray], None]:
        def record(name: str, array: np.ndarray) -> None:
            owner_name, _, name = f"{prefix}.{name}".lstrip(".").rpartition(".")
            owner = named.get(owner_name, named[prefix])
            formula, reads = formula_of(name, kind_of(owner))
            if not formula and not reads:  # an unknown stage reads the stage before it
                reads = tuple([s.name for s in stages if s.module == owner_name][-1:])
            inputs = _input_shapes(owner, owner_name, stages, reads)
            stages.append(Stage(name, owner_name, formula, inputs, np.array(array, copy=True)))

        return record

    try:
        for prefix, sub in module.named_modules():
            object.__setattr__(sub, "_recorder", recorder_for(prefix))
        output = module(x, *args, **kwargs)
    finally:
        for sub, previous in saved:
            object.__setattr__(sub, "_recorder", previous)
    return Trace(stages, output, type(module).__name__)


