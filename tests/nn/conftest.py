"""Fixtures shared by the GPT tests of this folder."""

import importlib.util
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def book():
    """tests/fixtures/make_gpt_fixtures.py as a module: the book's torch GPT classes, ``build_torch``,
    ``make_case``, ``run_torch`` (skipped without torch)."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("make_gpt_fixtures", FIXTURES / "make_gpt_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
