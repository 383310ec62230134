"""A store of two domains, each numbering its cameras 0 and 1: four (domain, camid) cameras for
`reid store info`, `reid eval --nmi`, `reid fit-pooling` and `reid eval --per-camera` alike."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd
import pytest

from reidcli.synthetic.conv_maps import CHANNELS, HEIGHT, WIDTH, toy_conv_maps
from tests.cli.helpers import run_cli

DOMAINS = ("syn_a", "syn_b")
PERSONS = 40                      # per domain; the first half trains


def write_domains_store(path, domains=DOMAINS) -> str:
    """Toy conv maps of each domain (one image per person and camera 0/1). Train: both images
    of the first half of the persons; test persons alternate which camera is the query."""
    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    frames, maps = [], []
    for d, domain in enumerate(domains):
        toy = toy_conv_maps(PERSONS, seed=d)
        person = toy.pids - toy.pids.min()
        query_cam = person % 2
        split = np.where(person < PERSONS // 2, "train",
                         np.where(toy.camids == query_cam, "query", "gallery"))
        frames.append(pd.DataFrame({
            "path": [f"{domain}/{p:04d}_c{c}.png" for p, c in zip(toy.pids, toy.camids)],
            "pid": person + 1, "camid": toy.camids, "split": split, "dataset": "toy",
            "domain": domain}))
        maps.append(toy.maps)
    records = normalize_frame(pd.concat(frames, ignore_index=True))
    maps = np.concatenate(maps)
    with StoreWriter(path, records, dataset="toy") as writer:
        writer.add_convmap("conv5_x", (CHANNELS, HEIGHT, WIDTH), dtype="float32")
        writer.append_convmap("conv5_x", maps)
        stripes = maps.reshape(len(maps), CHANNELS, 3, HEIGHT // 3, WIDTH).mean(axis=(3, 4))
        writer.set_feature("pcb_g", stripes.reshape(len(maps), -1), metric="cosine")
    return str(path)


@pytest.fixture(scope="module")
def domains_store(tmp_path_factory):
    return write_domains_store(tmp_path_factory.mktemp("domains") / "two.h5")


def _report(capsys, tmp_path, name, *argv):
    out = tmp_path / f"{name}.json"
    code, _, err = run_cli(capsys, "eval", *argv, "--json", out, "--quiet")
    assert code == 0, err
    return json.loads(out.read_text())


def test_every_command_counts_the_same_cameras(capsys, tmp_path, domains_store):
    code, out, err = run_cli(capsys, "store", "info", "--store", domains_store, "--json")
    assert code == 0, err
    splits = json.loads(out)["splits"]
    assert {s: splits[s]["cams"] for s in ("train", "query", "gallery")} == \
        {"train": 4, "query": 4, "gallery": 4}

    nmi = _report(capsys, tmp_path, "nmi", "--store", domains_store, "--nmi")["nmi"]
    assert nmi["k"] == 4

    model = tmp_path / "cdpcf.h5"
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", domains_store, "--out",
                           model, "--K", "2", "--E", "16", "--G", "3")
    assert code == 0, err
    assert "cameras syn_a/0, syn_a/1, syn_b/0, syn_b/1," in err
    with h5py.File(model) as h5:
        hp = json.loads(h5.attrs["hyperparameters"])
        assert hp["C"] == 4 and hp["camids"] == [0, 1, 0, 1]
        assert hp["camera_domains"] == ["syn_a", "syn_a", "syn_b", "syn_b"]
        assert h5["trial_0/conv5_x/weight_maps"].shape == (4 * HEIGHT * WIDTH, 2)

    report = _report(capsys, tmp_path, "per_cam", "--store", domains_store, "--model", model,
                     "--per-camera")
    cams = report["per_camera"]["cameras"]
    assert list(cams) == ["syn_a/0", "syn_a/1", "syn_b/0", "syn_b/1"]
    assert sum(c["num_valid_queries"] for c in cams.values()) == report["num_valid_queries"]
    assert report["per_camera"]["weighted_mean"]["mAP"] == pytest.approx(report["mAP"])
    code, out, err = run_cli(capsys, "eval", "--store", domains_store, "--model", model,
                             "--per-camera")
    assert code == 0, err
    assert "syn_b/cam 1" in out


def test_query_cams_select_that_camid_in_every_domain(capsys, tmp_path, domains_store):
    report = _report(capsys, tmp_path, "cam1", "--store", domains_store, "--query-cams", "1",
                     "--per-camera")
    assert list(report["per_camera"]["cameras"]) == ["syn_a/1", "syn_b/1"]


def test_camera_specific_maps_follow_the_domain(tmp_path, domains_store):
    """Camid 0 of syn_a and of syn_b get their own weight maps: pooling a syn_b image as if
    it were syn_a's camera 0 changes its embedding."""
    from reidcli import fitted
    from reidcli.pooling.cdpcf import CDPCF
    from reidcli.pooling.fit import fit_pooling_store
    from reidcli.store import open_store

    model = tmp_path / "m.h5"
    summary = fit_pooling_store(domains_store, model, CDPCF(K=2, E=16, G=3),
                                progress=False, with_average_images=False)
    assert summary.cameras == ["syn_a/0", "syn_a/1", "syn_b/0", "syn_b/1"]
    trial = fitted.load(model).for_trial(0)
    with open_store(domains_store) as st:
        rows = np.flatnonzero(st.records["domain"].to_numpy() == "syn_b")[:4]
        camids = st.records["camid"].to_numpy()[rows]
        own = trial.embed(st.convmaps, rows, camids, np.array(["syn_b"] * 4))
        other = trial.embed(st.convmaps, rows, camids, np.array(["syn_a"] * 4))
        np.testing.assert_array_equal(own, trial.read_inputs(st, rows))
    assert not np.allclose(own, other)


def test_unseen_domain_is_a_one_line_error(capsys, tmp_path, domains_store):
    model = tmp_path / "m.h5"
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", domains_store, "--out",
                           model, "--K", "2", "--E", "16", "--G", "3")
    assert code == 0, err
    other = write_domains_store(tmp_path / "other.h5", domains=("syn_a", "syn_c"))
    code, _, err = run_cli(capsys, "eval", "--store", other, "--model", model, "--quiet")
    assert code == 2
    assert "camera syn_c/0 was not seen in training (fitted cameras: syn_a/0, syn_a/1, " \
           "syn_b/0, syn_b/1)" in err


def test_a_fitted_file_without_camera_domains_still_evaluates(capsys, tmp_path):
    """Files written before ``camera_domains`` are read as cameras of one domain."""
    from reidcli.synthetic.conv_maps import write_toy_store

    store = write_toy_store(tmp_path / "toy.h5", seed=0, persons=60, trials=1)
    model = tmp_path / "new.h5"
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", store, "--out", model,
                           "--K", "2", "--E", "16", "--G", "3", "--layers", "conv5_x")
    assert code == 0, err
    new = _report(capsys, tmp_path, "new", "--store", store, "--model", model)
    with h5py.File(model, "r+") as h5:
        hp = json.loads(h5.attrs["hyperparameters"])
        del hp["camera_domains"]
        h5.attrs["hyperparameters"] = json.dumps(hp)
    old = _report(capsys, tmp_path, "old", "--store", store, "--model", model)
    assert old["cmc"] == new["cmc"] and old["mAP"] == new["mAP"]
