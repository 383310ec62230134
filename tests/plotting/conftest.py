"""Tiny inputs for the figure tests: a trained-free store of hand-crafted features, a
two-trial eval result, a toy C-DPCF fit and a run directory's metrics.csv."""
from __future__ import annotations

import json

import numpy as np
import pytest

from reidcli.features.extract import extract_handcrafted_store
from reidcli.features.layout import dataset_layout


@pytest.fixture(scope="session")
def tiny_store(tiny_synthetic_root, tmp_path_factory):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    out = tmp_path_factory.mktemp("plot_store") / "hsv.h5"
    return extract_handcrafted_store(layout, out, ["hsv-stripes"], maps=["color-grid"],
                                     progress=False)


@pytest.fixture
def two_results(tmp_path):
    """Two eval JSONs: a 2-trial one with a known std, and a single-trial one."""
    multi = {"protocol": "single-shot", "dataset": "viper", "num_trials": 2,
             "cmc": [0.3, 0.5, 0.7], "model": {"method": "cdpcf"},
             "trials": [{"cmc": [0.2, 0.4, 0.6]}, {"cmc": [0.4, 0.6, 0.8]}]}
    single = {"protocol": "market", "cmc": [0.1, 0.2, 0.25], "feature": "hsv-stripes",
              "trials": [{"cmc": [0.1, 0.2, 0.25]}]}
    paths = []
    for name, report in (("cdpcf.json", multi), ("hsv.json", single)):
        (tmp_path / name).write_text(json.dumps(report))
        paths.append(tmp_path / name)
    return paths


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = ["epoch,iteration,lr,loss,images_per_s,seconds,loss_ce,loss_tri,acc,phase"]
    for it in range(1, 13):
        rows.append(f"{(it - 1) // 4},{it},{0.1 if it <= 8 else 0.01},{5 - 0.3 * it},100,"
                    f"{it},{3 - 0.1 * it},{2 - 0.2 * it},{0.05 * it},bot")
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    (run / "config.json").write_text(json.dumps({"config": {"method": "bot",
                                                            "dataset": "synthetic",
                                                            "backbone": "tiny"}}))
    return run


def png_size(path):
    from PIL import Image

    with Image.open(path) as img:
        return img.size
