"""`reid eval` end to end on small stores written with StoreWriter."""
from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from reidcli import fitted
from reidcli.data.records import normalize_frame
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.engine import EvalOptions
from reidcli.provenance import sha256_file
from reidcli.store import StoreWriter
from tests.cli.helpers import run_cli


def _records(pids, cams, splits, dataset="synthetic"):
    n = len(pids)
    return normalize_frame(pd.DataFrame({"path": [f"img/{i:05d}.jpg" for i in range(n)],
                                         "pid": pids, "camid": cams, "split": splits,
                                         "dataset": dataset}))


def _problem(seed=0, nq=40, ng=160, ids=15, dim=8, cams=4):
    rng = np.random.default_rng(seed)
    pids = np.concatenate([rng.integers(1, ids + 1, nq), rng.integers(0, ids + 1, ng)])
    camids = rng.integers(0, cams, nq + ng)
    centers = rng.standard_normal((ids + 1, dim))
    feats = (centers[pids] + 0.9 * rng.standard_normal((nq + ng, dim))).astype(np.float32)
    splits = np.array(["query"] * nq + ["gallery"] * ng)
    return pids, camids, splits, feats


def _write(path, pids, cams, splits, feats, dataset="synthetic", protocol=None,
           metric="euclidean"):
    with StoreWriter(path, _records(pids, cams, splits, dataset), dataset=dataset,
                     provenance={"command": "test"}) as w:
        w.set_feature("emb", feats, metric=metric)
        if protocol is not None:
            name, rule, trials = protocol
            w.write_protocol(name, trials, eval_rule=rule)
    return path


def test_eval_writes_json_and_csv_in_the_fixed_form(capsys, tmp_path):
    pids, cams, splits, feats = _problem()
    store = _write(tmp_path / "s.h5", pids, cams, splits, feats)
    code, out, err = run_cli(capsys, "eval", "--store", store, "--json", tmp_path / "r.json",
                             "--csv", tmp_path / "r.csv", "--max-rank", "20", "--device", "cpu")
    assert code == 0, err
    assert "mAP" in out and "rank-1" in out
    report = json.loads((tmp_path / "r.json").read_text())
    for key in ("protocol", "num_valid_queries", "mAP", "mINP", "cmc", "trials"):
        assert key in report
    assert report["protocol"] == "market" and len(report["cmc"]) == 20
    q = splits == "query"
    want = evaluate_arrays(pids[q], cams[q], pids[~q], cams[~q], query_features=feats[q],
                           gallery_features=feats[~q], options=EvalOptions(max_rank=20))
    assert report["mAP"] == pytest.approx(want.mAP, abs=1e-12)
    assert report["cmc"] == pytest.approx(want.cmc.tolist(), abs=1e-12)
    assert report["num_valid_queries"] == want.num_valid_queries
    values = [report["mAP"], report["mINP"], *report["cmc"]]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert report["provenance"]["command"].startswith("reid eval")
    # hashed on a thread while the store was scored: the file's own digest all the same
    assert report["provenance"]["inputs"] == [{"path": str(store),
                                               "sha256": sha256_file(store)}]
    rows = list(csv.reader((tmp_path / "r.csv").open()))
    assert rows[0][:3] == ["rank", "cmc", "std"] and len(rows) == 21
    assert float(rows[1][1]) == pytest.approx(report["cmc"][0])
    # outputs are not overwritten without --force
    code, _, err = run_cli(capsys, "eval", "--store", store, "--json", tmp_path / "r.json")
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1


def test_eval_through_a_linear_projection_model(capsys, tmp_path):
    pids, cams, splits, feats = _problem(1)
    store = _write(tmp_path / "s.h5", pids, cams, splits, feats)
    rng = np.random.default_rng(5)
    W, mean = rng.standard_normal((8, 3)), rng.standard_normal(8)
    fitted.save(tmp_path / "m.h5", "linear-projection", {"W": W, "mean": mean}, feature="emb")
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", tmp_path / "m.h5",
                           "--json", tmp_path / "r.json", "--quiet")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    proj = ((feats - mean.astype(np.float32)) @ W.astype(np.float32)).astype(np.float32)
    q = splits == "query"
    want = evaluate_arrays(pids[q], cams[q], pids[~q], cams[~q], query_features=proj[q],
                           gallery_features=proj[~q])
    assert report["mAP"] == pytest.approx(want.mAP, abs=1e-9)
    assert report["model"]["method"] == "linear-projection"
    # a model for another dimension is a one-line error
    fitted.save(tmp_path / "bad.h5", "linear-projection", {"W": np.eye(5)})
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", tmp_path / "bad.h5")
    assert code == 2 and "5-dimensional" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", store)
    assert code == 2 and "not a reidcli fitted model" in err


def test_multi_trial_protocol_reports_each_trial_and_mean_std(capsys, tmp_path):
    rng = np.random.default_rng(2)
    ids, n = 30, 60
    pids = np.repeat(np.arange(1, ids + 1), 2)
    cams = np.tile([0, 1], ids)
    feats = (rng.standard_normal((ids, 6))[pids - 1] + 0.7 * rng.standard_normal((n, 6))
             ).astype(np.float32)
    trials = []
    for t in range(3):
        test = rng.permutation(ids)[:10] + 1
        rows = np.flatnonzero(np.isin(pids, test))
        trials.append({"query_idx": rows[cams[rows] == 0], "gallery_idx": rows[cams[rows] == 1],
                       "test_pids": test})
    store = _write(tmp_path / "s.h5", pids, cams, np.where(cams == 0, "query", "gallery"),
                   feats, dataset="viper", protocol=("half", "market", trials))
    code, out, err = run_cli(capsys, "eval", "--store", store, "--json", tmp_path / "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["protocol"] == "single-shot" and len(report["trials"]) == 3
    per_trial = [t["mAP"] for t in report["trials"]]
    assert report["mAP"] == pytest.approx(np.mean(per_trial))
    assert report["std"]["mAP"] == pytest.approx(np.std(per_trial))
    assert "pur" in report and len(report["trials"][0]["cmc_full"]) == 10
    assert "±" in out
    code, _, err = run_cli(capsys, "eval", "--store", store, "--trials", "0,2", "--json",
                           tmp_path / "r2.json")
    sub = json.loads((tmp_path / "r2.json").read_text())
    assert [t["trial"] for t in sub["trials"]] == [0, 2]
    assert sub["trials"][1]["mAP"] == pytest.approx(report["trials"][2]["mAP"])
    code, _, err = run_cli(capsys, "eval", "--store", store, "--trials", "7")
    assert code == 2 and "--trials" in err


def test_camera_split_rerank_and_nmi_options(capsys, tmp_path):
    pids, cams, splits, feats = _problem(3, nq=60, ng=200)
    store = _write(tmp_path / "s.h5", pids, cams, splits, feats)
    code, _, err = run_cli(capsys, "eval", "--store", store, "--protocol", "camera-split")
    assert code == 2 and "--query-cams" in err
    code, out, err = run_cli(capsys, "eval", "--store", store, "--protocol", "camera-split",
                             "--train-cams", "0,1", "--json", tmp_path / "c.json", "--nmi")
    assert code == 0, err
    report = json.loads((tmp_path / "c.json").read_text())
    assert set(report["per_camera"]["cameras"]) == {"2", "3"}
    assert report["per_camera"]["weighted_mean"]["mAP"] == pytest.approx(report["mAP"])
    assert 0.0 <= report["nmi"]["nmi"] <= 1.0 and report["nmi"]["k"] == 4
    code, _, err = run_cli(capsys, "eval", "--store", store, "--rerank", "--json",
                           tmp_path / "rr.json", "--quiet")
    assert code == 0, err
    rr = json.loads((tmp_path / "rr.json").read_text())
    assert rr["rerank"] == {"k1": 20, "k2": 6, "lambda_value": 0.3}
    assert 0.0 <= rr["mAP"] <= 1.0


def test_user_errors_are_one_line(capsys, tmp_path):
    pids, cams, splits, feats = _problem(4)
    bad = feats.copy()
    bad[3, 2] = np.nan
    store = _write(tmp_path / "nan.h5", pids, cams, splits, bad)
    code, _, err = run_cli(capsys, "eval", "--store", store)
    assert code == 2 and "NaN or Inf" in err and len(err.strip().splitlines()) == 1
    no_query = _write(tmp_path / "nq.h5", pids, cams, np.full(len(pids), "gallery"), feats)
    code, _, err = run_cli(capsys, "eval", "--store", no_query)
    assert code == 2 and "no query rows" in err
    disjoint = pids.copy()
    disjoint[splits == "query"] += 100
    store = _write(tmp_path / "dj.h5", disjoint, cams, splits, feats)
    code, _, err = run_cli(capsys, "eval", "--store", store)
    assert code == 2 and "has a match" in err
    code, _, err = run_cli(capsys, "eval", "--store", store, "--protocol", "bogus")
    assert code == 2 and "--protocol 'bogus'" in err
    code, _, err = run_cli(capsys, "eval", "--store", store, "--feature", "nope")
    assert code == 2 and "no feature 'nope'" in err
    code, _, err = run_cli(capsys, "eval", "--store", store, "--ap", "11-point")
    assert code == 2 and "--ap" in err


def test_imported_store_without_dataset_is_scored_with_market(capsys, tmp_path):
    pids, cams, splits, feats = _problem(5)
    np.savez(tmp_path / "e.npz", features=feats, pid=pids, camid=cams, split=splits)
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz",
                           tmp_path / "e.npz")
    assert code == 0, err
    code, _, err = run_cli(capsys, "eval", "--store", tmp_path / "s.h5", "--json",
                           tmp_path / "r.json", "--quiet")
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["protocol"] == "market"
