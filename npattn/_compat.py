"""The module paths of npattn 0.1 stay importable after the move to subpackages.

``import npattn.functional``, ``from npattn.trace import single_token_context`` and the like keep
working: each old flat path is registered in ``sys.modules`` as the module that now holds its
contents, or, where one old module was split in several (``trace``), as a module that looks each
name up in the new ones.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# old path -> the module that now holds all of it
MOVED = {
    "functional": "npattn.nn.functional",
    "layers": "npattn.nn.layers",
    "attention": "npattn.nn.attention",
    "losses": "npattn.nn.losses",
    "fused": "npattn.kernels.fused",
    "tiled": "npattn.kernels.tiled",
    "_fastpath": "npattn.kernels.blocks",
    "tasks": "npattn.train.tasks",
    "checkpoint": "npattn.train.checkpoint",
    "diagnose": "npattn.debug.diagnose",
    "stagecheck": "npattn.debug.stagecheck",
    "usercode": "npattn.debug.usercode",
    "demo": "npattn.cli.demo",
}
# old path -> the modules its contents were split into, searched in order
SPLIT = {
    "module": ("npattn.nn.module", "npattn.nn.sequential"),
    "trace": (
        "npattn.debug.formulas",
        "npattn.debug.weights",
        "npattn.debug.trace",
        "npattn.debug.predict",
        "npattn.debug.rows",
        "npattn.debug.compare",
        "npattn.cli.trace",
    ),
}


class _SplitModule(types.ModuleType):
    """A module whose attributes are those of several others (the first that has the name wins)."""

    def __init__(self, name: str, sources: tuple[str, ...]) -> None:
        super().__init__(name, f"{name}: moved; its names now live in {', '.join(sources)}")
        self._sources = [importlib.import_module(s) for s in sources]
        self.__all__ = sorted({n for m in self._sources for n in getattr(m, "__all__", ())})

    def __getattr__(self, name: str) -> Any:
        for module in self._sources:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted({n for m in self._sources for n in dir(m)})


def register_old_paths() -> None:
    """Make every old ``npattn.X`` path importable and, unless the package already has a name X (a
    function such as ``npattn.trace``), reachable as an attribute, as a submodule would be."""
    package = sys.modules["npattn"]
    for old, new in MOVED.items():
        module = sys.modules.setdefault(f"npattn.{old}", importlib.import_module(new))
        if not hasattr(package, old):
            setattr(package, old, module)
    for old, sources in SPLIT.items():
        sys.modules.setdefault(f"npattn.{old}", _SplitModule(f"npattn.{old}", sources))
