"""benchmarks/dmgnet_speed.py runs one tiny iteration of each step and prints its table."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dmgnet_speed_prints_seconds_memory_and_ratios_to_bot(capsys):
    rows = _load("dmgnet_speed").main(["--backbone", "tiny", "--size", "32x16", "--p", "2",
                                       "--k", "2", "--num-ids", "8", "--iters", "1",
                                       "--warmup", "0", "--device", "cpu"])
    out = capsys.readouterr().out
    printed = re.findall(r"^(BoT|DMG-Net order [12])\s+fp32\s+([\d.]+)\s+([\d.]+)\s+"
                         r"([\d.]+)\s+(\S+)$", out, flags=re.M)
    assert [r[0] for r in printed] == ["BoT", "DMG-Net order 1", "DMG-Net order 2"]
    assert float(printed[0][2]) == 1.0
    assert all(float(seconds) > 0 for _, seconds, _, _, _ in printed)
    assert [label for label, *_ in rows] == [r[0] for r in printed]
    assert all(peak >= 0 for *_, peak in rows)
