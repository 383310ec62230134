"""`reid demo` runs every available stage on synthetic data and reports real numbers."""
from __future__ import annotations

import json

import numpy as np

from reidcli.store import open_store
from tests.cli.helpers import run_cli


def test_demo_tiny_end_to_end(capsys, tmp_path):
    code, out, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", tmp_path / "data",
                             "--out", tmp_path / "out")
    assert code == 0, err
    for stage in ("data", "records", "extract", "train", "fit-pooling", "eval", "plot"):
        assert f"│ {stage} " in out
    for figure in ("cmc", "tsne"):                  # the demo ends with its figures
        assert (tmp_path / "out" / f"synthetic_tiny_{figure}.png").stat().st_size > 10_000
    cnn = json.loads((tmp_path / "out" / "synthetic_tiny_bot_tiny.json").read_text())
    assert cnn["feature"] == "bnneck" and cnn["num_valid_queries"] > 0
    assert "tiny BoT" in out
    for method in ("xqda", "cdpcf"):
        other = json.loads((tmp_path / "out" / f"synthetic_tiny_{method}.json").read_text())
        assert other["model"]["method"] == method and other["num_valid_queries"] > 0
    report = json.loads((tmp_path / "out" / "synthetic_tiny_hsv.json").read_text())
    assert report["protocol"] == "market" and report["num_valid_queries"] > 0
    cmc = np.asarray(report["cmc"])
    assert np.all(np.diff(cmc) >= 0) and 0 <= cmc[0] <= cmc[-1] <= 1
    assert f"{100 * report['mAP']:.1f}" in out
    with open_store(tmp_path / "out" / "synthetic_tiny_hsv.h5") as st:
        assert st.feature_info("hsv-stripes")["dim"] == 144
        assert st.convmap_layers == ["color-grid"]
        assert st.provenance["inputs"][0]["listing_sha256"]
    # a second run reuses the data and replaces its own outputs
    code, out2, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", tmp_path / "data",
                              "--out", tmp_path / "out")
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "synthetic_tiny_hsv.json").read_text())["cmc"] == \
        report["cmc"]
