"""WARCA-protocol reports: each split's draws averaged, then mean ± std over splits."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.report import build_report
from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
from reidcli.store import StoreWriter
from tests.evaluation.test_multi_store import known_block

#: trial → query hits; trials 0-1 are split 0's two draws, trials 2-3 split 1's
HITS = ((True, True), (True, False), (True, False), (False, False))


def _store(path, draws, hits=HITS):
    rows, trials = [], []
    for k, block in enumerate(hits):
        start = len(rows)
        rows += known_block(block, first_pid=1 + 10 * k, x0=1000.0 * k)
        trials.append(list(range(start, len(rows))))
    pids, cams, splits, xs = (np.array(c) for c in zip(*rows))
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i:05d}.jpg" for i in range(len(rows))], "pid": pids, "camid": cams,
        "split": splits, "dataset": "synthetic"}))
    feats = np.zeros((len(rows), 2), dtype=np.float32)
    feats[:, 0] = xs
    with StoreWriter(path, records, dataset="synthetic", provenance={"command": "t"}) as w:
        w.set_feature("emb", feats)
        w.write_protocol("warca", [
            {"query_idx": [r for r in t if splits[r] == "query"],
             "gallery_idx": [r for r in t if splits[r] == "gallery"]} for t in trials],
            eval_rule="market", options={"protocol": "warca", "draws": draws})
    return path


def _report(path):
    evaluation = evaluate_store(StoreEvalRequest(
        store=path, device="cpu", options=EvalOptions(max_rank=3, progress=False)))
    return build_report(evaluation.protocol, evaluation.trials, evaluation.meta)


def test_std_is_over_splits_of_draw_means(tmp_path):
    report = _report(_store(tmp_path / "s.h5", draws=2))
    split_r1 = [np.mean([1.0, 0.5]), np.mean([0.5, 0.0])]            # 0.75, 0.25
    assert report["cmc"][0] == pytest.approx(np.mean(split_r1))
    assert report["std"]["cmc"][0] == pytest.approx(np.std(split_r1))   # 0.25, not 0.354
    split_ap = [np.mean([1.0, 0.75]), np.mean([0.75, 0.5])]
    assert report["std"]["mAP"] == pytest.approx(np.std(split_ap))
    assert report["aggregation"]["num_splits"] == 2
    assert report["aggregation"]["draws_per_split"] == [2, 2] and report["num_trials"] == 4


def test_one_draw_per_split_keeps_the_std_over_trials(tmp_path):
    report = _report(_store(tmp_path / "s.h5", draws=1))
    per_trial = [1.0, 0.5, 0.5, 0.0]
    assert report["std"]["cmc"][0] == pytest.approx(np.std(per_trial))
    assert "aggregation" not in report


def test_trials_sharing_a_fit_reuse_embeddings_and_score_the_same(tmp_path):
    from reidcli import fitted

    store = _store(tmp_path / "s.h5", draws=2)
    rng = np.random.default_rng(0)
    split0, split1 = ({"W": np.eye(2) + 0.01 * rng.standard_normal((2, 2))} for _ in range(2))
    shared = fitted.save(tmp_path / "shared.h5", "linear-projection",
                         [split0, split0, split1, split1])
    copies = fitted.save(tmp_path / "copies.h5", "linear-projection",
                         [dict(split0), dict(split0), dict(split1), dict(split1)])
    loaded = fitted.load(shared)
    assert loaded.shares_fits and [loaded.fit_of(k) for k in range(4)] == [0, 0, 2, 2]
    assert not fitted.load(copies).shares_fits
    reports = []
    for model in (shared, copies):
        evaluation = evaluate_store(StoreEvalRequest(
            store=store, model=model, device="cpu",
            options=EvalOptions(max_rank=3, progress=False)))
        reports.append(build_report(evaluation.protocol, evaluation.trials, evaluation.meta))
    assert reports[0]["cmc"] == reports[1]["cmc"] and reports[0]["mAP"] == reports[1]["mAP"]


def test_embedding_cache_transforms_each_row_once_per_fit():
    from reidcli.evaluation.run import EmbeddingCache

    calls = []

    class Double:
        def transform(self, x):
            calls.append(len(x))
            return 2 * x

    feats = np.arange(12, dtype=np.float64).reshape(6, 2)
    cache = EmbeddingCache()
    rows = np.array([5, 1, 3])
    np.testing.assert_array_equal(cache.transform(Double(), feats[rows], rows, (0, None)),
                                  2 * feats[rows])
    more = np.array([3, 0, 5, 2])                     # 3 and 5 are known: 2 rows are new
    np.testing.assert_array_equal(cache.transform(Double(), feats[more], more, (0, None)),
                                  2 * feats[more])
    assert calls == [3, 2]
    cache.transform(Double(), feats[more], more, (2, None))     # another fit: all new
    assert calls == [3, 2, 4]
