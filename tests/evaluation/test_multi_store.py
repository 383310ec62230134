"""Several stores scored with the same options and aggregated over stores (evaluation.multi).

The stores are built so that every query's rank and AP are known: a query's true match lies
nearer than one distractor (a hit: rank 1, AP 1, INP 1) or farther (a miss: rank 2, AP 1/2,
INP 1/2), and the queries of a store are 100 apart, out of each other's way. A store's R1 is
then the fraction of hits, its mAP and mINP the mean of 1 (hit) and 1/2 (miss).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.errors import ReidError, StoreError, UsageError
from reidcli.evaluation import multi
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.multi import (StoreEvalRequest, aggregate_reports, evaluate_stores,
                                      expand_store_patterns)
from reidcli.store import StoreWriter


def known_block(hits, first_pid=1, x0=0.0):
    """Rows (pid, camid, split, x) of one query per entry of ``hits``: its match at distance
    1 (hit) or 3 (miss) and a distractor identity at distance 2."""
    rows = []
    for i, hit in enumerate(hits):
        pid, x = first_pid + 2 * i, x0 + 100.0 * i
        rows += [(pid, 0, "query", x), (pid, 1, "gallery", x + (1.0 if hit else 3.0)),
                 (pid + 1, 1, "gallery", x + 2.0)]
    return rows


def write_store(path, rows, *, dataset="synthetic", trials=None, dim=2, feature="emb",
                metric="euclidean"):
    """A store of ``rows`` (features [n, dim]: x, then zeros); ``trials``: protocol trials as
    lists of row indices (query rows are those of split ``query``)."""
    pids, cams, splits, xs = (np.array(c) for c in zip(*rows))
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i:05d}.jpg" for i in range(len(rows))], "pid": pids, "camid": cams,
        "split": splits, "dataset": dataset}))
    feats = np.zeros((len(rows), dim), dtype=np.float32)
    feats[:, 0] = xs
    with StoreWriter(path, records, dataset=dataset, provenance={"command": "test"}) as w:
        w.set_feature(feature, feats, metric=metric)
        if trials is not None:
            w.write_protocol("known", [
                {"query_idx": [r for r in t if splits[r] == "query"],
                 "gallery_idx": [r for r in t if splits[r] == "gallery"],
                 "test_pids": sorted({int(pids[r]) for r in t})} for t in trials],
                eval_rule="market")
    return path


def known_values(hits):
    """(R1, mAP, mINP) of a block of queries with these hits (see module doc)."""
    ap = [1.0 if h else 0.5 for h in hits]
    return float(np.mean(hits)), float(np.mean(ap)), float(np.mean(ap))


def request(store, **kw):
    return StoreEvalRequest(store=store, device="cpu",
                            options=EvalOptions(max_rank=5, progress=False), **kw)


HITS = ((True, True), (True, False), (False, False))          # R1 = 1, 0.5, 0


def test_mean_and_population_std_over_stores_of_known_values(tmp_path):
    stores = [write_store(tmp_path / f"s{i}.h5", known_block(h)) for i, h in enumerate(HITS)]
    result = evaluate_stores([request(s) for s in stores])
    per_store = [known_values(h) for h in HITS]
    r1, m_ap, m_inp = (np.array(v) for v in zip(*per_store))
    assert result.num_stores == 3 and result.stores == [str(s) for s in stores]
    for report, (want_r1, want_ap, want_inp) in zip(result.reports, per_store):
        assert report["cmc"][0] == pytest.approx(want_r1, abs=1e-12)
        assert report["mAP"] == pytest.approx(want_ap, abs=1e-12)
        assert report["mINP"] == pytest.approx(want_inp, abs=1e-12)
    agg = result.aggregate
    assert agg["cmc"][0] == pytest.approx(r1.mean(), abs=1e-12)
    assert agg["std"]["cmc"][0] == pytest.approx(r1.std(ddof=0), abs=1e-12)
    assert agg["mAP"] == pytest.approx(m_ap.mean(), abs=1e-12)
    assert agg["std"]["mAP"] == pytest.approx(m_ap.std(ddof=0), abs=1e-12)
    assert agg["mINP"] == pytest.approx(m_inp.mean(), abs=1e-12)
    assert agg["std"]["mINP"] == pytest.approx(m_inp.std(ddof=0), abs=1e-12)
    # every match is within rank 2: the rest of the curve is 1 in every store, std 0
    assert agg["cmc"][1:] == pytest.approx([1.0] * (len(agg["cmc"]) - 1))
    assert agg["std"]["cmc"][1:] == pytest.approx([0.0] * (len(agg["cmc"]) - 1))
    assert [s["store"] for s in agg["stores"]] == [str(s) for s in stores]
    assert [s["mAP"] for s in agg["stores"]] == pytest.approx(list(m_ap))


def test_a_store_counts_once_with_its_mean_over_its_own_trials(tmp_path):
    # store A: 3 trials with R1 1, 1, 0; store B: 2 trials with R1 1, 0 (both single-shot:
    # a market-rule store with several trials). Mean over stores differs from the mean over
    # the 5 trials pooled.
    def trial_store(path, trial_hits):
        rows, trials = [], []
        for k, hits in enumerate(trial_hits):
            block = known_block(hits, first_pid=1 + 10 * k, x0=1000.0 * k)
            trials.append(list(range(len(rows), len(rows) + len(block))))
            rows += block
        return write_store(path, rows, trials=trials)

    a_hits = ((True, True), (True, True), (False, False))
    b_hits = ((True, True), (False, False))
    result = evaluate_stores([request(trial_store(tmp_path / "a.h5", a_hits)),
                              request(trial_store(tmp_path / "b.h5", b_hits))])
    store_r1 = []
    for report, hits in zip(result.reports, (a_hits, b_hits)):
        trial_r1 = [known_values(h)[0] for h in hits]
        assert report["num_trials"] == len(hits)
        assert report["cmc"][0] == pytest.approx(np.mean(trial_r1), abs=1e-12)
        assert report["std"]["cmc"][0] == pytest.approx(np.std(trial_r1), abs=1e-12)
        store_r1.append(np.mean(trial_r1))
    pooled = np.mean([known_values(h)[0] for h in a_hits + b_hits])
    assert result.aggregate["cmc"][0] == pytest.approx(np.mean(store_r1), abs=1e-12)
    assert result.aggregate["cmc"][0] != pytest.approx(pooled)
    assert result.aggregate["std"]["cmc"][0] == pytest.approx(np.std(store_r1), abs=1e-12)
    # full-curve protocol: PUR and CMC-AUC are aggregated too
    purs = [r["pur"] for r in result.reports]
    assert result.aggregate["pur"] == pytest.approx(np.mean(purs))
    assert result.aggregate["std"]["auc"] == pytest.approx(np.std([r["auc"]
                                                                   for r in result.reports]))


def test_stores_that_disagree_are_refused_before_any_is_scored(tmp_path, monkeypatch):
    scored = []
    monkeypatch.setattr(multi, "evaluate_store", lambda req: scored.append(req))
    good = write_store(tmp_path / "good.h5", known_block(HITS[0]))
    other_protocol = write_store(tmp_path / "viper.h5", known_block(HITS[1]), dataset="viper")
    wide = write_store(tmp_path / "wide.h5", known_block(HITS[1]), dim=5)
    renamed = write_store(tmp_path / "renamed.h5", known_block(HITS[1]), feature="bot")
    cases = [(other_protocol, {}, EvaluationError, "protocol single-shot"),
             (wide, {}, EvaluationError, "5 dimensions"),
             (renamed, {}, EvaluationError, "feature 'bot'"),
             (renamed, {"feature": "emb"}, StoreError, "no feature 'emb'")]
    for bad, kw, kind, words in cases:
        with pytest.raises(kind) as info:
            evaluate_stores([request(good, **kw), request(bad, **kw)])
        message = info.value.message
        assert str(bad) in message and words in message and "\n" not in message
    assert scored == []
    cosine = write_store(tmp_path / "cos.h5", known_block(HITS[1]), metric="cosine")
    with pytest.raises(EvaluationError, match="compared by cosine"):
        evaluate_stores([request(good), request(cosine)])
    assert scored == []
    monkeypatch.undo()                # a requested distance makes them comparable
    both = evaluate_stores([request(good, distance="euclidean"),
                            request(cosine, distance="euclidean")])
    assert both.num_stores == 2 and {r["distance"] for r in both.reports} == {"euclidean"}


def test_an_error_inside_one_store_names_that_store(tmp_path):
    good = write_store(tmp_path / "good.h5", known_block(HITS[0]))
    no_match = known_block(HITS[0])
    no_match = [(pid + 50 if split == "query" else pid, cam, split, x)
                for pid, cam, split, x in no_match]
    bad = write_store(tmp_path / "nomatch.h5", no_match)
    with pytest.raises(ReidError) as info:
        evaluate_stores([request(good), request(bad)])
    assert f"store {bad}:" in info.value.message and "match" in info.value.message


def test_store_patterns_expand_in_sorted_order(tmp_path):
    for name in ("t2", "t10", "t1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "store.h5").write_bytes(b"")
    literal = tmp_path / "t2" / "store.h5"
    pattern = str(tmp_path / "t1*" / "store.h5")
    got = expand_store_patterns([literal, pattern])
    assert got == [literal] + [tmp_path / n / "store.h5" for n in sorted(["t1", "t10"])]
    assert expand_store_patterns([tmp_path / "absent.h5"]) == [tmp_path / "absent.h5"]
    with pytest.raises(UsageError, match="matches no file"):
        expand_store_patterns([str(tmp_path / "nothing_*.h5")])
    with pytest.raises(UsageError, match="given twice"):
        expand_store_patterns([literal, str(tmp_path / "t*" / "store.h5")])


def test_aggregate_of_reports_pads_short_curves_and_keeps_undefined_metrics_undefined():
    def report(cmc, m_ap, trials=1):
        return {"store": f"s{len(cmc)}", "cmc": cmc, "mAP": m_ap, "mINP": 0.25,
                "num_trials": trials, "num_valid_queries": 4, "num_queries": 4,
                "num_skipped_queries": 0}

    short, long = report([0.5], None), report([0.25, 0.75, 1.0], 0.5)
    agg = aggregate_reports([short, long])
    padded = np.array([[0.5, 0.5, 0.5], [0.25, 0.75, 1.0]])
    assert agg["cmc"] == pytest.approx(padded.mean(0).tolist())
    assert agg["std"]["cmc"] == pytest.approx(padded.std(0).tolist())
    assert agg["mAP"] is None and agg["std"]["mAP"] is None       # one store has no mAP
    assert agg["mINP"] == 0.25 and agg["std"]["mINP"] == 0.0
    assert "pur" not in agg and agg["num_stores"] == 2
    with pytest.raises(UsageError):
        aggregate_reports([])
