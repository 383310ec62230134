"""`reid eval` over several stores: repeated --store, glob patterns, the mean ± std over
stores on the terminal, in JSON (read by `reid plot cmc` and the paper comparison) and CSV."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from reidcli import fitted
from reidcli.paper.results import load_result
from reidcli.paper.compare import main as compare_main
from reidcli.plotting.cmc import plot_cmc
from tests.cli.helpers import run_cli
from tests.evaluation.test_multi_store import HITS, known_block, known_values, write_store


def three_runs(tmp_path):
    """Stores runs/t<i>/store.h5 with R1 = 1, 0.5, 0 (tests.evaluation.test_multi_store)."""
    stores = []
    for i, hits in enumerate(HITS):
        (tmp_path / "runs" / f"t{i}").mkdir(parents=True)
        stores.append(write_store(tmp_path / "runs" / f"t{i}" / "store.h5", known_block(hits)))
    return stores


def test_repeated_store_reports_each_store_and_the_mean_and_std(capsys, tmp_path):
    stores = three_runs(tmp_path)
    args = [a for s in stores for a in ("--store", s)]
    code, out, err = run_cli(capsys, "eval", *args, "--max-rank", "5", "--device", "cpu",
                             "--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv")
    assert code == 0, err
    r1, m_ap, m_inp = (np.array(v) for v in zip(*(known_values(h) for h in HITS)))
    # terminal: one row per store, then the mean ± std row
    # the stores are named by what tells them apart (runs/<store>/store.h5)
    assert "stores: " + str(tmp_path / "runs" / "<store>" / "store.h5") in out
    lines = out.splitlines()
    rows = [next(line for line in lines if f" t{i} " in line) for i in range(len(stores))]
    for row, want_r1 in zip(rows, r1):
        assert f"{100 * want_r1:.2f}" in row
    assert "mean ± std over 3 stores" in out
    assert f"{100 * r1.mean():.2f} ± {100 * r1.std():.2f}" in out
    assert f"{100 * m_ap.mean():.2f} ± {100 * m_ap.std():.2f}" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["num_stores"] == 3 and report["num_trials"] == 3
    assert report["cmc"][0] == pytest.approx(r1.mean(), abs=1e-12)
    assert report["std"]["cmc"][0] == pytest.approx(r1.std(), abs=1e-12)
    assert report["mAP"] == pytest.approx(m_ap.mean(), abs=1e-12)
    assert report["std"]["mAP"] == pytest.approx(m_ap.std(), abs=1e-12)
    assert report["mINP"] == pytest.approx(m_inp.mean(), abs=1e-12)
    assert report["protocol"] == "market" and report["feature"] == "emb"
    assert [s["store"] for s in report["stores"]] == [str(s) for s in stores]
    for entry, want_r1, want_ap in zip(report["stores"], r1, m_ap):
        assert entry["cmc"][0] == pytest.approx(want_r1, abs=1e-12)
        assert entry["mAP"] == pytest.approx(want_ap, abs=1e-12)
        assert len(entry["trials"]) == 1 and entry["protocol"] == "market"
    assert [p["path"] for p in report["provenance"]["inputs"]] == [str(s) for s in stores]
    rows = list(csv.reader((tmp_path / "r.csv").open()))
    assert rows[0] == ["rank", "cmc", "std"] + [str(s) for s in stores]
    assert len(rows) == 1 + len(report["cmc"])
    assert float(rows[1][1]) == pytest.approx(r1.mean()) \
        and float(rows[1][2]) == pytest.approx(r1.std())
    assert [float(v) for v in rows[1][3:]] == pytest.approx(list(r1))


def test_the_json_is_read_by_plot_cmc_and_the_paper_comparison(capsys, tmp_path):
    stores = three_runs(tmp_path)
    code, _, err = run_cli(capsys, "eval", *[a for s in stores for a in ("--store", s)],
                           "--device", "cpu", "--json", tmp_path / "r.json", "--quiet")
    assert code == 0, err
    r1, m_ap, _ = (np.array(v) for v in zip(*(known_values(h) for h in HITS)))
    summary = load_result(tmp_path / "r.json")
    assert summary["r1"] == pytest.approx(100 * r1.mean())
    assert summary["s1"] == pytest.approx(100 * r1.std())
    assert summary["map"] == pytest.approx(100 * m_ap.mean())
    assert summary["trials"] == 3 and summary["stores"] == 3
    assert compare_main(["cdpcf", "--dataset", "viper", f"DPCF={tmp_path / 'r.json'}"]) == 0
    plot = plot_cmc([tmp_path / "r.json"], tmp_path / "cmc.png", max_rank=5)
    (mean, std), = plot.curves.values()
    assert mean[0] == pytest.approx(100 * r1.mean()) and std[0] == pytest.approx(100 * r1.std())
    code, _, err = run_cli(capsys, "plot", "cmc", tmp_path / "r.json", "--out",
                           tmp_path / "cli.png")
    assert code == 0, err
    assert (tmp_path / "cli.png").stat().st_size > 0


def test_a_glob_pattern_expands_in_sorted_order_and_one_store_is_reported_as_before(
        capsys, tmp_path):
    stores = three_runs(tmp_path)
    pattern = str(tmp_path / "runs" / "t*" / "store.h5")
    code, _, err = run_cli(capsys, "eval", "--store", pattern, "--json", tmp_path / "g.json",
                           "--quiet")
    assert code == 0, err
    report = json.loads((tmp_path / "g.json").read_text())
    assert [s["store"] for s in report["stores"]] == [str(s) for s in sorted(stores)]
    code, _, err = run_cli(capsys, "eval", "--store", str(tmp_path / "runs" / "t1*" / "*.h5"),
                           "--json", tmp_path / "one.json", "--quiet")
    assert code == 0, err
    one = json.loads((tmp_path / "one.json").read_text())
    assert "stores" not in one and "num_stores" not in one
    assert one["cmc"][0] == pytest.approx(known_values(HITS[1])[0])
    code, _, err = run_cli(capsys, "eval", "--store", str(tmp_path / "runs" / "x*.h5"))
    assert code == 2 and "x*.h5" in err and "matches no file" in err
    assert len(err.strip().splitlines()) == 1


def test_stores_that_disagree_are_a_one_line_error_naming_the_store(capsys, tmp_path):
    stores = three_runs(tmp_path)
    wide = write_store(tmp_path / "wide.h5", known_block(HITS[0]), dim=3)
    viper = write_store(tmp_path / "viper.h5", known_block(HITS[0]), dataset="viper")
    for bad, words in ((wide, "3 dimensions"), (viper, "protocol single-shot")):
        code, _, err = run_cli(capsys, "eval", "--store", stores[0], "--store", bad)
        assert code == 2 and str(bad) in err and words in err, err
        assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "eval", "--store", stores[0], "--store", stores[1],
                           "--feature", "bot")
    assert code == 2 and str(stores[0]) in err and "--feature" in err
    assert len(err.strip().splitlines()) == 1


def test_one_fitted_model_is_applied_to_every_store(capsys, tmp_path):
    stores = three_runs(tmp_path)
    # a projection onto the negated first coordinate keeps every distance, so the scores
    # equal the single-store scores through the same model
    fitted.save(tmp_path / "m.h5", "linear-projection",
                {"W": np.array([[-2.0], [0.0]]), "mean": np.zeros(2)}, feature="emb")
    code, _, err = run_cli(capsys, "eval", *[a for s in stores for a in ("--store", s)],
                           "--model", tmp_path / "m.h5", "--json", tmp_path / "r.json",
                           "--quiet")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["model"]["method"] == "linear-projection"
    for i, store in enumerate(stores):
        code, _, err = run_cli(capsys, "eval", "--store", store, "--model", tmp_path / "m.h5",
                               "--json", tmp_path / f"one{i}.json", "--quiet")
        assert code == 0, err
        alone = json.loads((tmp_path / f"one{i}.json").read_text())
        assert report["stores"][i]["mAP"] == pytest.approx(alone["mAP"], abs=1e-12)
        assert report["stores"][i]["model"]["method"] == "linear-projection"
    assert report["mAP"] == pytest.approx(np.mean([known_values(h)[1] for h in HITS]))
