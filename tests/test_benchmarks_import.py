"""Every benchmark script imports with the current package layout (a moved module must not
leave a benchmark that fails only when someone runs it)."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py")
                 if p.stem != "__init__")


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_imports(name):
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.__doc__, f"benchmarks/{name}.py has no docstring saying what it measures"
