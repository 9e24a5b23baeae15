"""The command line's Ctrl-C guard is set after about 1 ms of npattn's import: before it, npattn
imports only the C module ``_signal``, ``os``, ``sys`` and ``npattn._interrupts``, which imports os
and sys alone. ``import signal`` (its enums) and ``typing`` took about 10 ms, a window in which a
Ctrl-C printed a traceback from npattn's first lines."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "npattn"


def _imported(tree, stop=None):
    names = []
    for node in tree.body:
        if stop is not None and stop(node):
            break
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_nothing_slow_is_imported_before_the_guard():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    guard = lambda node: isinstance(node, ast.If) and "_started_as_command" in ast.unparse(node.test)  # noqa: E731
    before = _imported(tree, stop=guard)
    assert sorted(before) == ["_signal", "npattn._interrupts", "os", "sys"]


def test_the_guards_module_imports_os_and_sys_only():
    tree = ast.parse((PACKAGE / "_interrupts.py").read_text())
    assert sorted(_imported(tree)) == ["os", "sys"]
