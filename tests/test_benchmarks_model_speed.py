"""benchmarks/train_speed.py and extract_speed.py run and print measured ratios (tiny sizes)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["train_speed", "extract_speed"])
def test_speed_benchmark_prints_rates_and_ratios(name, capsys):
    _load(name).main(["--backbone", "tiny", "--input-size", "96x32", "--batch-size", "4",
                      "--iters", "1", "--warmup", "0", "--device", "cpu"])
    out = capsys.readouterr().out
    rows = re.findall(r"^((?:fp32|AMP)[^\n]*?)\s+([\d.]+)\s+([\d.]+)$", out, flags=re.M)
    assert len(rows) >= 3
    assert rows[0][0] == "fp32" and float(rows[0][2]) == 1.0
    assert all(float(rate) > 0 for _, rate, _ in rows)
