"""Tiny inputs for the figure tests: training-free stores of hand-crafted features (two
descriptors of the same rows), a two-modality store, a two-trial eval result, a toy C-DPCF
fit with real image files and a run directory's metrics.csv."""
from __future__ import annotations

import json

import numpy as np
import pytest

from reidcli.features.extract import extract_handcrafted_store
from reidcli.features.layout import dataset_layout


@pytest.fixture(autouse=True)
def one_native_thread():
    """One OpenMP/BLAS thread (scikit-learn's t-SNE): on 2 shared cores, spinning OpenMP
    threads slow a tiny t-SNE down by 10× and more."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="session")
def tiny_store(tiny_synthetic_root, tmp_path_factory):
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    out = tmp_path_factory.mktemp("plot_store") / "hsv.h5"
    return extract_handcrafted_store(layout, out, ["hsv-stripes"], maps=["color-grid"],
                                     progress=False)


@pytest.fixture(scope="session")
def tiny_store_lbp(tiny_synthetic_root, tmp_path_factory):
    """The rows of ``tiny_store`` described by another descriptor (hist-lbp)."""
    layout = dataset_layout("synthetic", tiny_synthetic_root, progress=False, name="tiny")
    out = tmp_path_factory.mktemp("plot_store_lbp") / "lbp.h5"
    return extract_handcrafted_store(layout, out, ["hist-lbp"], progress=False)


@pytest.fixture(scope="session")
def two_modality_store(tmp_path_factory):
    """6 persons × (camera 0 visible, camera 1 infrared) × 2 images; query = the first image
    of each (person, camera), gallery = the second. Features: person centre + a modality
    offset + noise. Image paths do not exist (``mm/…``)."""
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    rng = np.random.default_rng(0)
    pid, cam, shot = (a.ravel() for a in np.meshgrid(np.arange(1, 7), [0, 1], [0, 1],
                                                     indexing="ij"))
    records = normalize_frame(pd.DataFrame({
        "path": [f"mm/{p}_{c}_{s}.png" for p, c, s in zip(pid, cam, shot)], "pid": pid,
        "camid": cam, "modality": np.where(cam == 0, "visible", "infrared"),
        "split": np.where(shot == 0, "query", "gallery"), "dataset": "mm"}))
    centres = 3 * rng.standard_normal((7, 8))
    feats = centres[pid] + 1.5 * cam[:, None] + 0.3 * rng.standard_normal((len(pid), 8))
    path = tmp_path_factory.mktemp("plot_mm") / "mm.h5"
    with StoreWriter(path, records, dataset="mm") as writer:
        writer.set_feature("f", feats.astype(np.float32))
        writer.write_protocol("two_modality", [{"query_idx": np.flatnonzero(shot == 0),
                                                "gallery_idx": np.flatnonzero(shot == 1)}])
    return path


@pytest.fixture(scope="session")
def toy_fit(tmp_path_factory):
    """(toy conv-map store with real image files, its C-DPCF fit K=3, E=8)."""
    from reidcli.pooling.cdpcf import CDPCF
    from reidcli.pooling.fit import fit_pooling_store
    from reidcli.synthetic.conv_maps import write_toy_store
    from threadpoolctl import threadpool_limits

    folder = tmp_path_factory.mktemp("plot_toy")
    store = write_toy_store(folder / "toy.h5", image_dir=folder / "images")
    fitted = folder / "cdpcf.h5"
    with threadpool_limits(1):                   # session scope: before one_native_thread
        fit_pooling_store(store, fitted, CDPCF(K=3, E=8),
                          progress=False)
    return store, fitted


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
