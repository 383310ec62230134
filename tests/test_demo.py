"""`reid demo` runs every available stage on synthetic data and reports real numbers."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from reidcli.store import open_store
from tests.cli.helpers import run_cli, spy
from tests.plotting.conftest import one_native_thread  # noqa: F401


@pytest.mark.usefixtures("one_torch_thread", "one_native_thread")
def test_demo_tiny_end_to_end(capsys, tmp_path, monkeypatch):
    import reidcli.demo
    import reidcli.plotting.cmc
    import reidcli.plotting.tsne

    demos = spy(monkeypatch, reidcli.demo, "run_demo")
    cmc_plots = spy(monkeypatch, reidcli.plotting.cmc, "plot_cmc")
    tsne_plots = spy(monkeypatch, reidcli.plotting.tsne, "plot_tsne")
    code, out, err = run_cli(capsys, "demo", "--preset", "tiny", "--root", tmp_path / "data",
                             "--out", tmp_path / "out")
    assert code == 0, err
    # the CMC legend comes from the result JSONs; the logged plot commands are what ran
    legend = [label.rsplit(" (R1", 1)[0] for label in cmc_plots[0].labels]
    assert legend == ["hsv-stripes (euclidean)", "hsv-stripes + XQDA", "color-grid + C-DPCF",
                      "BoT tiny bnneck (euclidean)", "BoT tiny bnneck + camera Norm (euclidean)",
                      "BoT tiny bnneck + DART3 LITE (euclidean)"]
    commands = [s.command for s in demos[0].steps if s.stage == "plot"]
    assert all(f"--label '{name}'" in commands[0] for name in legend)
    tsne, = tsne_plots
    assert tsne.markers is not None and "--marker-by domain" in commands[1]
    for command in commands:                    # each logged command runs as printed
        argv = shlex.split(command)
        assert argv[:2] == ["reid", "plot"] and argv[-2] == "--out"
        code, _, err = run_cli(capsys, *argv[1:-1], tmp_path / Path(argv[-1]).name)
        assert code == 0, (command, err)
    assert cmc_plots[1].labels == cmc_plots[0].labels                   # same figures
    np.testing.assert_allclose(tsne_plots[1].points[0], tsne.points[0])
    for stage in ("data", "records", "extract", "train", "fit-pooling", "adapt", "eval",
                  "plot"):
        assert f"│ {stage} " in out
    for figure in ("cmc", "tsne"):                  # the demo ends with its figures
        assert (tmp_path / "out" / f"synthetic_tiny_{figure}.png").stat().st_size > 10_000
    cnn = json.loads((tmp_path / "out" / "synthetic_tiny_bot_tiny.json").read_text())
    assert cnn["feature"] == "bnneck" and cnn["num_valid_queries"] > 0
    assert "tiny BoT" in out and "tiny BoT + DART3 LITE" in out
    lite = json.loads((tmp_path / "out" / "synthetic_tiny_bot_tiny_dart3-lite.json").read_text())
    assert lite["store_provenance"]["adapt"]["method"] == "dart3"
    assert lite["num_valid_queries"] == cnn["num_valid_queries"]
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
