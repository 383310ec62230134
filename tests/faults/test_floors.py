"""True dependency floors (issue 28: "typer>=0.9 is declared but cli/main.py imports
typer._click"): the lower bounds pyproject declares are the versions `.ci/floors.py` installs
and runs the CLI on, so a floor cannot drift from what is tested. Cheap, no network."""
from __future__ import annotations

import importlib.util
import re

import pytest
from packaging.version import Version

from tests.faults.helpers import REPO

tomllib = pytest.importorskip("tomllib")

#: the floors the issue asks to be true, at least
REQUIRED = {"typer", "rich", "h5py", "numpy", "filelock"}


def _floor_check():
    spec = importlib.util.spec_from_file_location("ci_floors", REPO / ".ci" / "floors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _declared_floors() -> dict[str, str]:
    with open(REPO / "pyproject.toml", "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    floors = {}
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", dep.strip())
        assert match, f"dependency {dep!r} has no plain >= lower bound"
        floors[match.group(1).lower()] = match.group(2)
    return floors


def test_floor_check_installs_the_declared_floors():
    """Case "declared floor not the true floor": each pinned version equals pyproject's."""
    floors = _floor_check().FLOORS
    declared = _declared_floors()
    assert REQUIRED <= set(floors), REQUIRED - set(floors)
    for name, version in floors.items():
        assert name in declared, f"{name} is pinned by .ci/floors.py but not declared"
        assert Version(declared[name]) == Version(version), (name, declared[name], version)


def test_companions_are_not_declared_dependencies():
    """Companions (click for older typer, commonmark for rich 12) are what the floors need
    from their own dependencies, never a bound of ours that would go untested."""
    check = _floor_check()
    assert not set(check.COMPANIONS) & set(_declared_floors())
    assert not set(check.COMPANIONS) & set(check.FLOORS)


def test_ci_runs_the_floor_check():
    text = (REPO / ".ci" / "run").read_text()
    assert "python .ci/floors.py" in text
