"""Every ```python block of README.md and docs/*.md runs, in order, one namespace per page.

A page's blocks build on each other like a notebook's cells. A comment line ``# SomeError: message``
right after code says that code raises it: the code since the previous such comment must raise
exactly that error class with a message that starts with that text (so the docs show real
messages). A block that needs what a reader has and the tests do not (the book's PyTorch classes)
starts with ``# not run``. The blocks run from a temporary folder, so files they write land there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block of ``page``, except those marked ``# not run``."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        code = m.group(1)
        if not code.lstrip().startswith("# not run"):
            blocks.append((text.count("\n", 0, m.start()) + 2, code))
    return blocks


def test_the_pages_have_blocks():
    assert sum(len(python_blocks(p)) for p in PAGES) >= 10


EXPECTED_ERROR = re.compile(r"^# (\w+Error): (.*)$")


def chunks(code: str) -> list[tuple[int, str, tuple[str, str] | None]]:
    """Split a block at its ``# SomeError: message`` comments: (first line, code, (error, message)
    the code must raise, or None)."""
    out: list[tuple[int, str, tuple[str, str] | None]] = []
    start, lines = 0, code.split("\n")
    for i, text in enumerate(lines):
        m = EXPECTED_ERROR.match(text)
        if m and "".join(lines[start:i]).strip():
            out.append((start, "\n".join(lines[start:i]), (m.group(1), m.group(2).strip())))
            start = i + 1
    out.append((start, "\n".join(lines[start:]), None))
    return out


def test_chunks_split_at_error_comments():
    code = "a = 1\nf(a)\n# ShapeError: x: expected\n#   more\nb = 2\n"
    assert chunks(code) == [(0, "a = 1\nf(a)", ("ShapeError", "x: expected")), (3, "#   more\nb = 2\n", None)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for line, code in python_blocks(page):
        for offset, chunk, expected in chunks(code):
            where = f"{page.name}:{line + offset}"
            try:
                exec(compile(chunk, where, "exec"), namespace)
            except Exception as exc:  # name the block: the traceback alone points into a string
                if expected and type(exc).__name__ == expected[0] and str(exc).startswith(expected[1]):
                    continue
                raise AssertionError(f"the ```python block at {where} failed: {exc!r}") from exc
            assert expected is None, f"the ```python block at {where} should raise {expected[0]}: {expected[1]}"
