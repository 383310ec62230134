"""Careless inputs of `reid plot` (issue 28): a result whose metrics are not numbers, more
labels than results, a --compare store of other rows, an output that is a folder, an edited
metrics.csv — each one error line (exit 2) naming what is wrong, and no figure written."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.faults.helpers import assert_one_line_error_in_process, files, reid_in_process

GOOD = {"protocol": "market", "dataset": "synthetic", "num_trials": 1, "mAP": 0.4,
        "mINP": 0.2, "cmc": [0.3, 0.5, 0.7],
        "trials": [{"trial": 0, "mAP": 0.4, "mINP": 0.2, "cmc": [0.3, 0.5, 0.7]}]}


@pytest.fixture(autouse=True)
def agg(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")


def _result(folder, name, report=None, raw=None):
    path = folder / name
    path.write_text(raw if raw is not None else json.dumps(report))
    return path


# case "plot cmc takes a string mAP" and its kin: a metric that is text, a percentage, NaN or
# a boolean, at the top or in a trial, and a num_trials that is text (was a TypeError
# traceback): one line naming the file and the key
@pytest.mark.parametrize("change, key", [
    ({"mAP": "0.43"}, "'mAP' is '0.43'"),
    ({"mAP": 43.0}, "'mAP' is 43.0"),
    ({"mAP": True}, "'mAP' is True"),
    ({"mINP": "high"}, "'mINP' is 'high'"),
    ({"trials": [{"cmc": [0.3, 0.5, 0.7], "mAP": "0.4"}]}, "'trials[0].mAP' is '0.4'"),
    ({"num_trials": "1"}, "'num_trials' is '1'"),
    ({"num_trials": 0}, "'num_trials' is 0"),
])
def test_cmc_metrics_that_are_not_numbers(change, key, capsys, tmp_path):
    bad = _result(tmp_path, "bad.json", {**GOOD, **change})
    result = reid_in_process("plot", "cmc", bad, "--out", tmp_path / "c.png", capsys=capsys)
    assert_one_line_error_in_process(result, str(bad), key)
    assert not (tmp_path / "c.png").exists()


# case "a NaN mAP" (JSON NaN, which Python's json reads): named, not drawn as "mAP —"
def test_cmc_nan_metric(capsys, tmp_path):
    bad = _result(tmp_path, "nan.json", raw=json.dumps(GOOD).replace('"mAP": 0.4,',
                                                                      '"mAP": NaN,', 1))
    result = reid_in_process("plot", "cmc", bad, "--out", tmp_path / "c.png", capsys=capsys)
    assert_one_line_error_in_process(result, str(bad), "'mAP' is nan")


# case "plot cmc takes more labels than results" (extra labels were dropped silently), and an
# empty label (a legend entry with no name)
@pytest.mark.parametrize("labels, needles", [
    (["a", "b", "c"], ["3 --label values for 2 results"]),
    (["a", ""], ["--label", "empty"]),
])
def test_cmc_labels(labels, needles, capsys, tmp_path):
    good = _result(tmp_path, "good.json", GOOD)
    args = [a for label in labels for a in ("--label", label)]
    result = reid_in_process("plot", "cmc", good, good, *args, "--out", tmp_path / "c.png",
                             capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert not (tmp_path / "c.png").exists()


def test_cmc_fewer_labels_than_results_still_plot(capsys, tmp_path):
    good = _result(tmp_path, "good.json", GOOD)
    code, _, err = reid_in_process("plot", "cmc", good, good, "--label", "mine", "--out",
                                   tmp_path / "c.png", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "c.png").exists()


# case "an output path that is an existing folder" (with or without a figure suffix, with or
# without --force): named as a folder, never replaced
@pytest.mark.parametrize("name, force", [("figs", False), ("figs.png", False),
                                         ("figs.png", True)])
def test_out_is_a_folder(name, force, capsys, tmp_path):
    good = _result(tmp_path, "good.json", GOOD)
    folder = tmp_path / name
    folder.mkdir()
    result = reid_in_process("plot", "cmc", good, "--out", folder,
                             *(["--force"] if force else []), capsys=capsys)
    assert_one_line_error_in_process(result, f"--out {folder} is a folder")
    assert folder.is_dir() and files(folder) == set()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A 12-row store and copies of it with other rows: pids shuffled, cameras swapped, three
    rows fewer; and the same rows again (its "adapted copy")."""
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    folder = tmp_path_factory.mktemp("plot_fault_stores")
    pid, cam = (a.ravel() for a in np.meshgrid(np.arange(1, 7), [0, 1], indexing="ij"))
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{p}_{c}.png" for p, c in zip(pid, cam)], "pid": pid, "camid": cam,
        "split": np.where(cam == 0, "query", "gallery"), "dataset": "toy"}))
    feats = np.random.default_rng(0).standard_normal((len(pid), 4)).astype(np.float32)

    def write(name, recs, f):
        path = folder / name
        with StoreWriter(path, recs.reset_index(drop=True), dataset="toy") as writer:
            writer.set_feature("f", f)
        return path

    pids = records.copy()
    pids["pid"] = pids["pid"].to_numpy()[::-1]
    cams = records.copy()
    cams["camid"] = 1 - cams["camid"].to_numpy()
    return {"base": write("base.h5", records, feats), "same": write("same.h5", records, feats),
            "pids": write("pids.h5", pids, feats), "cams": write("cams.h5", cams, feats),
            "fewer": write("fewer.h5", records.iloc[:9], feats[:9])}


# case "plot tsne --compare a store of other rows" (same paths, other identities or cameras
# were drawn side by side as if the same images): refused naming both stores and the column
@pytest.mark.parametrize("other, needle", [("pids", "differ in pid; first: row 0, 1 vs 6"),
                                           ("cams", "differ in camid"),
                                           ("fewer", "(9 rows, not 12)")])
def test_tsne_compare_of_other_rows(other, needle, stores, capsys, tmp_path):
    result = reid_in_process("plot", "tsne", "--store", stores["base"], "--compare",
                             stores[other], "--out", tmp_path / "t.png", capsys=capsys)
    assert_one_line_error_in_process(result, f"--compare {stores[other]}",
                                     f"other rows than {stores['base']}", needle)
    assert files(tmp_path) == set()


def test_tsne_compare_check_passes_the_same_rows(stores):
    from reidcli.plotting.tsne import check_same_rows
    from reidcli.store.reader import open_store

    with open_store(stores["base"]) as a, open_store(stores["same"]) as b:
        check_same_rows(a.records, b.records, stores["base"], stores["same"])


# case "plot tsne --split naming no split of the store": the store's splits are listed
def test_tsne_split_that_matches_nothing(stores, capsys, tmp_path):
    result = reid_in_process("plot", "tsne", "--store", stores["base"], "--split", "test",
                             "--out", tmp_path / "t.png", capsys=capsys)
    assert_one_line_error_in_process(result, "split(s) test", "the store has: gallery, query")


# case "an edited metrics.csv / config.json": text in a numeric column is named (was drawn as
# gaps), a config.json that is not JSON no longer raises a JSONDecodeError traceback
@pytest.mark.parametrize("metrics, config, needles", [
    ("epoch,iteration,lr,loss\n0,1,0.1,2.0\n0,2,fast,1.5\n", None,
     ["metrics.csv: column 'lr' on line 3 holds 'fast'"]),
    ("epoch,iteration,lr,loss\n0,one,0.1,2.0\n", None, ["column 'iteration' on line 2"]),
    ("epoch,iteration,lr,loss\n0,1,0.1,2.0\n0,2,0.1,1.5\n", "{not json", None),
    ("epoch,iteration,lr,loss\n0,1,0.1,2.0\n0,2,0.1,1.5\n", "[1, 2]", None),
])
def test_training_inputs(metrics, config, needles, capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text(metrics)
    if config is not None:
        (run / "config.json").write_text(config)
    out = tmp_path / "t.png"
    result = reid_in_process("plot", "training", "--model", run, "--out", out, capsys=capsys)
    if needles is None:                                # the title falls back to the folder
        assert result[0] == 0, result
        assert out.exists()
    else:
        assert_one_line_error_in_process(result, *needles)
        assert not out.exists()
