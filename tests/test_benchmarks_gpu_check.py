"""benchmarks/gpu_check.py --tiny: every check of the prepared GPU check runs on the CPU at toy
sizes, so the script a GPU machine gets for minutes cannot rot (docs/performance.md)."""
from __future__ import annotations

import json

from benchmarks import gpu_check


def test_tiny_gpu_check_runs_every_check_and_writes_its_report(tmp_path, capsys):
    code = gpu_check.main(["--tiny", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")])
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    failed = {name: check.get("error") for name, check in report["checks"].items()
              if not check.get("ok")}
    assert failed == {} and code == 0
    assert list(report["checks"]) == list(gpu_check.CHECKS)
    for net in ("pcb", "bot", "dgvae", "dmgnet"):
        (row,) = report["checks"][f"train_{net}"]["rows"]
        assert row["losses_finite"] and row["images_per_s"] > 0
    assert report["checks"]["agree_train"]["max_rel_diff"] == 0.0    # CPU twice: bitwise
    assert report["checks"]["eval"]["rows"][0]["mAP"] > 0
    markdown = (tmp_path / "out" / "gpu_check.md").read_text()
    assert "| train_dgvae | yes |" in markdown and "## eval" in markdown


def test_only_adds_the_checks_it_reads():
    assert gpu_check.NEEDS["adapt"] == ("train_bot", "extract")
    assert set(gpu_check.NEEDS) <= set(gpu_check.CHECKS)
