"""benchmarks/adapt_speed.py runs every method and prints measured times and ratios."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "adapt_speed.py"


@pytest.mark.usefixtures("one_torch_thread")
def test_adapt_speed_prints_the_table_5_grid(capsys):
    spec = importlib.util.spec_from_file_location("adapt_speed", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--gallery", "3000", "--dim", "64", "--batches", "1,2,64", "--ref-batches",
                 "64", "--min-queries", "8", "--device", "cpu"])
    out = capsys.readouterr().out
    rows = {m.group(1).strip(): m.group(2).split()
            for m in re.finditer(r"^(none|norm|dart3-lite(?:/bf16)?|dart3|tent|temp)\s+(.*)$",
                                 out, flags=re.M)}
    assert set(rows) >= {"none", "norm", "dart3-lite", "dart3-lite/bf16", "dart3", "tent",
                         "temp"}
    assert rows["dart3"][0] == "–" and rows["tent"][0] == "–"          # B=1: batch BN
    assert all(float(v) > 0 for v in rows["dart3-lite"])
    assert re.search(r"speed-up \(reference/ours\)\s+([\d.]+)×", out)
    # the previous CPU schedule, timed in the same run, and previous / current per batch
    before = re.search(r"^dart3-lite, before\s+(.*)$", out, flags=re.M).group(1).split()
    ratios = re.search(r"^  before / now\s+(.*)$", out, flags=re.M).group(1).split()
    assert len(before) == len(ratios) == 3 and all(float(v) > 0 for v in before)
    for b, r, now in zip(before, ratios, rows["dart3-lite"]):    # printed to 0.01 ms, 0.01×
        b, r, now = float(b), float(r.rstrip("×")), float(now)
        upper = (b + 0.005) / (now - 0.005) + 0.005 if now >= 0.01 else float("inf")
        assert (b - 0.005) / (now + 0.005) - 0.005 <= r <= upper
    assert re.search(r"^(PASS|FAIL)  dart3-lite at B=64 on CPU", out, flags=re.M)
