"""`reid eval --search K` (issue 31): each query's K nearest gallery rows, vectorised and
ordered by (distance, gallery row), equal to a brute-force ranking of `reid eval`'s own
distances; CSV/JSON outputs; unlabelled stores detected."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import pandas as pd

from reidcli.data.records import normalize_frame
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.run import trial_distances
from reidcli.evaluation.search import (check_labelled, search_csv_text, search_json,
                                       search_store, topk_smallest, unlabelled_roles)
from reidcli.store.reader import open_store
from reidcli.store.writer import StoreWriter


def _store(path, n_query=5, n_gallery=40, pid=-1, dim=8, seed=0, shared_row=False):
    """A store of random features: ``n_query`` query and ``n_gallery`` gallery rows with
    pid ``pid`` (-1: unlabelled)."""
    rng = np.random.default_rng(seed)
    n = n_query + n_gallery
    frame = normalize_frame(pd.DataFrame({
        "path": [f"/img/{i:03d}.jpg" for i in range(n)], "pid": [pid] * n,
        "camid": [0] * n, "split": ["query"] * n_query + ["gallery"] * n_gallery,
        "dataset": ["images"] * n}))
    feats = rng.standard_normal((n, dim)).astype(np.float32)
    feats[n_query + 3] = feats[n_query + 7]                    # an exact tie in the gallery
    with StoreWriter(path, frame, dataset="images") as w:
        w.add_feature("f", dim)
        w.append_feature("f", feats)
        if shared_row:                                        # row 0 also a gallery row
            trial = {"train_idx": np.zeros(0, np.int64), "query_idx": np.arange(n_query),
                     "gallery_idx": np.arange(n), "train_pids": np.zeros(0, np.int64),
                     "test_pids": np.array([pid])}
            w.write_protocol("standard", [trial], eval_rule="market")
    return path


def test_topk_smallest_is_a_stable_sort_prefix_on_numpy_and_torch():
    rng = np.random.default_rng(3)
    block = rng.integers(0, 6, (7, 30)).astype(np.float32)   # many ties
    want = np.argsort(block, axis=1, kind="stable")[:, :5]
    pos, values = topk_smallest(block, 5)
    # ties, also across the k-th place, rank the lower column first
    np.testing.assert_array_equal(pos, want)
    np.testing.assert_array_equal(values, np.take_along_axis(block, want, 1))
    torch = pytest.importorskip("torch")

    class Backend:                 # what the torch backend offers topk_smallest
        is_torch = True

        @staticmethod
        def to_numpy(t):
            return t.cpu().numpy()

    tpos, tvalues = topk_smallest(torch.from_numpy(block), 5, Backend())
    np.testing.assert_array_equal(tpos, want)
    np.testing.assert_array_equal(tvalues, values)
    whole, _ = topk_smallest(block, 30)                       # k = G: the full stable order
    np.testing.assert_array_equal(whole, np.argsort(block, axis=1, kind="stable"))


def test_search_equals_brute_force_ranking_of_eval_distances(tmp_path):
    store = _store(tmp_path / "s.h5")
    result = search_store(store, 6, block_rows=2)             # 3 query blocks
    q_rows, g_rows, dist = trial_distances(store)
    order = np.lexsort((np.broadcast_to(np.arange(len(g_rows)), dist.shape), dist), axis=1)
    np.testing.assert_array_equal(result.query_rows, q_rows)
    np.testing.assert_array_equal(result.gallery_rows, g_rows[order[:, :6]])
    np.testing.assert_allclose(result.distances, np.take_along_axis(dist, order[:, :6], 1),
                               rtol=1e-6)
    assert result.meta["k"] == 6 and result.meta["feature"] == "f"
    assert search_store(store, 1000).gallery_rows.shape == (5, 40)   # K > gallery: all


def test_a_row_that_is_query_and_gallery_is_never_its_own_match(tmp_path):
    store = _store(tmp_path / "s.h5", shared_row=True)
    result = search_store(store, 45)
    assert result.gallery_rows.shape == (5, 44)               # itself left out
    assert not (result.gallery_rows == result.query_rows[:, None]).any()


def test_outputs_and_unlabelled_detection(tmp_path):
    store = _store(tmp_path / "s.h5")
    result = search_store(store, 3)
    with open_store(store) as st:
        records = st.records
    rows = list(csv.DictReader(search_csv_text(result, records).splitlines()))
    assert len(rows) == 15 and rows[0]["rank"] == "1" and rows[0]["query_pid"] == "-1"
    # the written distance reads back to the same float32
    assert np.float32(float(rows[0]["distance"])) == result.distances[0, 0]
    report = search_json(result, records)
    json.dumps(report)
    assert [m["row"] for m in report["queries"][1]["matches"]] == \
        result.gallery_rows[1].tolist()
    pids = np.array([-1, -1, 4, 5])
    assert unlabelled_roles(pids, np.array([0, 1]), np.array([2, 3])) == "queries"
    assert unlabelled_roles(pids, np.array([2]), np.array([0, 3])) is None
    assert unlabelled_roles(pids, np.array([2]), np.array([0, 1])) == "gallery"
    with pytest.raises(EvaluationError, match="search"):
        check_labelled(store)
    check_labelled(_store(tmp_path / "l.h5", pid=3))          # labelled: no error
