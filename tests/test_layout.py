"""The package's architecture, enforced: imports run one way (bottom to top), no module grows past
MAX_LINES, every subpackage is packaged, and the flat module paths of npattn 0.1 still import."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "npattn"
MAX_LINES = 500

# Bottom to top. A module may import from its own layer or a lower one, never a higher one.
# A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("npattn.errors", "npattn._scalars", "npattn._checks", "npattn._html", "npattn._interrupts"),
    ("npattn.random", "npattn.book"),
    ("npattn.nn.functional",),
    ("npattn.kernels",),
    ("npattn.nn",),
    ("npattn.optim", "npattn.gradcheck"),
    ("npattn.train",),
    ("npattn.debug",),
    ("npattn.cli", "npattn.__main__"),
    ("npattn",),
]


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer of tests/test_layout.py")
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, name: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every npattn import of a module's source. ``from a import b`` counts as
    importing ``a.b`` when that is a module of the package, else as importing ``a``."""
    found = []
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*sub.split(".")) / "__init__.py"
                ).exists()
                found.append((node.lineno, sub if is_module else base))
    return [(line, m) for line, m in found if m == "npattn" or m.startswith("npattn.")]


def upward_imports(path: Path, source: str | None = None) -> list[str]:
    """Every import in ``path`` (or in ``source`` as if it were that file) of a higher layer."""
    name = module_name(path)
    source = path.read_text(encoding="utf-8") if source is None else source
    own = layer_of(name)
    return [
        f"{path.relative_to(ROOT)}:{line} imports {target} (layer {layer_of(target)} > {own}: {LAYERS[own][0]})"
        for line, target in imported_modules(source, name, path.name == "__init__.py")
        if layer_of(target) > own
    ]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    for path in SOURCES:
        layer_of(module_name(path))


def test_imports_run_one_way():
    problems = [p for path in SOURCES for p in upward_imports(path)]
    assert not problems, "imports that run upward:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("npattn/nn/functional/attention.py", "from npattn.nn.module import Parameter"),
        ("npattn/kernels/fused.py", "from npattn.nn import attention"),
        ("npattn/nn/module.py", "from npattn.optim import SGD"),
        ("npattn/random/generator.py", "from npattn.nn.functional import softmax_forward"),
        ("npattn/train/loop.py", "import npattn.debug.trace"),
        ("npattn/debug/trace.py", "from npattn.cli import main"),
        ("npattn/nn/layers.py", "from npattn import Linear"),
    ],
)
def test_a_planted_upward_import_is_caught(path, line):
    file = ROOT / path
    assert upward_imports(file, file.read_text(encoding="utf-8") + "\n" + line + "\n")


def test_no_module_is_too_long():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by idea): {long}"


def test_every_subpackage_is_packaged():
    """setup.cfg's find: packages every folder with an __init__.py: each folder of .py files has one."""
    for folder in {p.parent for p in SOURCES}:
        assert (folder / "__init__.py").exists(), f"{folder.relative_to(ROOT)} has no __init__.py"


OLD_PATHS = [
    ("npattn.functional", "softmax_forward"),
    ("npattn.kernels", "attention"),
    ("npattn.optim", "Adam"),
    ("npattn.losses", "CrossEntropyLoss"),
    ("npattn.tasks", "SelectiveCopy"),
    ("npattn.module", "Module"),
    ("npattn.layers", "Linear"),
    ("npattn.attention", "MultiHeadAttention"),
    ("npattn.fused", "fused_forward"),
    ("npattn.tiled", "tiled_forward"),
    ("npattn.checkpoint", "save"),
    ("npattn.diagnose", "diagnose"),
    ("npattn.stagecheck", "gradcheck_pipeline"),
    ("npattn.usercode", "check_attention"),
    ("npattn.trace", "predict_shapes"),
    ("npattn.trace", "single_token_context"),
    ("npattn.trace", "run_trace"),
    ("npattn.trace", "TRACE_CLASSES"),
    ("npattn.trace", "WEIGHT_NAMES"),
    ("npattn.trace", "Implementation"),
    ("npattn.train", "progress_line"),
    ("npattn.train", "run_train_command"),
    ("npattn.train", "OPTIMIZERS"),
    ("npattn.cli", "build_parser"),
    ("npattn.demo", "run_demo"),
    ("npattn._fastpath", "flush_below"),
    ("npattn.gradcheck", "gradcheck_stage"),
    ("npattn.random", "TorchGenerator"),
]


@pytest.mark.parametrize(("path", "name"), OLD_PATHS)
def test_the_old_module_paths_still_import(path, name):
    assert hasattr(importlib.import_module(path), name)


def test_old_submodules_are_attributes_too():
    import npattn

    assert npattn.demo.run_demo is importlib.import_module("npattn.cli.demo").run_demo
    assert callable(npattn.trace)  # the function, as in npattn 0.1 (the module path is npattn.debug)


def test_star_import_of_a_split_module():
    namespace: dict = {}
    exec("from npattn.trace import *", namespace)
    assert {"predict_shapes", "check_rows", "compare", "trace", "run_trace"} <= set(namespace)
