"""Each protocol's special rule (docs/datasets.md E1–E5, DART3 camera split)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.protocols import (auto_protocol, get_protocol, identity_codes,
                                          sysu_location, unseen_query_cameras)
from reidcli.evaluation.sgs import sampling_priority
from tests.evaluation.reference import reference_eval, reference_sgs


def test_sysu_cam3_queries_skip_cam2_gallery_and_cam6_queries_skip_nothing():
    # gallery: cam2 (camid 1) match nearest, cam1 (camid 0) match, cam4 (camid 3) other id
    g_pids, g_cams = [1, 1, 2], [1, 0, 3]
    dist = np.array([[0.1, 0.3, 0.2], [0.1, 0.3, 0.2]], dtype=np.float32)
    res = evaluate_arrays([1, 1], [2, 5], g_pids, g_cams, distances=dist, protocol="sysu",
                          options=EvalOptions(max_rank=3))
    # cam-3 query: cam-2 image dropped → list pid2, pid1 → rank 1; cam-6 query: rank 0
    assert res.outcomes.first_rank.tolist() == [1, 0]
    assert sysu_location(np.array([0, 1, 2, 3, 4, 5])).tolist() == [1, 2, 2, 4, 5, 6]


def test_sysu_query_whose_location_holds_the_whole_gallery_has_no_match():
    # cam-3 query, gallery only in cam 2 (same room) → skipped; cam-6 query is scored
    res = evaluate_arrays([1, 1], [2, 5], [1, 2], [1, 1], protocol="sysu",
                          distances=np.array([[0.1, 0.2], [0.1, 0.2]], dtype=np.float32))
    assert res.num_valid_queries == 1 and res.skipped["no_match"] == 1


def test_sysu_cmc_deduplicates_identities_but_map_does_not():
    g_pids, g_cams = [2, 2, 3, 1], [0, 0, 0, 0]
    dist = np.array([[0.1, 0.2, 0.3, 0.4]], dtype=np.float32)
    sysu = evaluate_arrays([1], [5], g_pids, g_cams, distances=dist, protocol="sysu",
                           options=EvalOptions(max_rank=4))
    regdb = evaluate_arrays([1], [5], g_pids, g_cams, distances=dist, protocol="regdb",
                            options=EvalOptions(max_rank=4))
    assert int(sysu.outcomes.first_rank[0]) == 2          # pid2, pid3, pid1
    assert int(regdb.outcomes.first_rank[0]) == 3
    assert sysu.mAP == regdb.mAP == pytest.approx(1 / 4)
    assert sysu.gallery_size == 3                          # full curve over identities


@pytest.mark.parametrize("seed", [0, 1])
def test_sysu_agrees_with_reference(seed):
    rng = np.random.default_rng(seed)
    nq, ng = 60, 200
    q_pids = rng.integers(1, 15, nq)
    q_cams = rng.choice([2, 5], nq)
    g_pids = rng.integers(1, 15, ng)
    g_cams = rng.choice([0, 1, 3, 4], ng)
    dist = (np.round(rng.random((nq, ng)) * 20) / 20).astype(np.float32)     # ties
    res = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=dist, protocol="sysu",
                          options=EvalOptions(max_rank=20, block_rows=7))
    ref = reference_eval(dist, q_pids, q_cams, g_pids, g_cams, rule="sysu", max_rank=20)
    assert np.array_equal(res.outcomes.first_rank, ref["first"])
    np.testing.assert_allclose(res.cmc, ref["cmc"], atol=1e-12)
    assert res.mAP == pytest.approx(ref["mAP"], abs=1e-12)
    assert res.mINP == pytest.approx(ref["mINP"], abs=1e-12)


def test_regdb_keeps_same_camera_matches_market_drops_them():
    dist = np.array([[0.2, 0.1]], dtype=np.float32)
    regdb = evaluate_arrays([1], [0], [1, 2], [0, 0], distances=dist, protocol="regdb",
                            options=EvalOptions(max_rank=2))
    assert regdb.num_valid_queries == 1 and regdb.cmc.tolist() == [0.0, 1.0]
    with pytest.raises(EvaluationError):
        evaluate_arrays([1], [0], [1, 2], [0, 0], distances=dist, protocol="market")


def _cuhk03_like(seed, ids=12, per_cam=3):
    rng = np.random.default_rng(seed)
    pids = np.repeat(np.arange(1, ids + 1), 2 * per_cam)
    cams = np.tile(np.repeat([0, 1], per_cam), ids)
    feats = rng.standard_normal((ids, 6))[pids - 1] + 0.9 * rng.standard_normal((len(pids), 6))
    d = np.sqrt(((feats[:, None] - feats[None]) ** 2).sum(-1)).astype(np.float32)
    return d, pids, cams


def test_cuhk03_single_gallery_shot_agrees_with_reference_and_block_size():
    d, pids, cams = _cuhk03_like(0)
    opts = dict(max_rank=12, sgs_repeats=6, seed=3)
    a = evaluate_arrays(pids, cams, pids, cams, distances=d, protocol="cuhk03_sgs", trial=2,
                        options=EvalOptions(**opts))
    b = evaluate_arrays(pids, cams, pids, cams, distances=d, protocol="cuhk03_sgs", trial=2,
                        options=EvalOptions(block_rows=5, **opts))
    ref = reference_sgs(d, pids, cams, pids, cams, split=2, repeats=6, seed=3, max_rank=12)
    np.testing.assert_array_equal(a.outcomes.sgs_ranks, ref["ranks"])
    np.testing.assert_array_equal(a.outcomes.sgs_ranks, b.outcomes.sgs_ranks)
    np.testing.assert_allclose(a.cmc, ref["cmc"], atol=1e-12)
    assert a.mAP is None and a.mINP is None
    other_split = evaluate_arrays(pids, cams, pids, cams, distances=d, protocol="cuhk03_sgs",
                                  trial=5, options=EvalOptions(**opts))
    assert not np.array_equal(other_split.outcomes.sgs_ranks, a.outcomes.sgs_ranks)


def test_cuhk03_sampling_is_uniform_per_identity():
    prio = sampling_priority(0, 0, np.arange(4000), 0, 3)
    winners = np.bincount(np.argmax(prio, axis=1), minlength=3) / 4000
    np.testing.assert_allclose(winners, 1 / 3, atol=0.03)
    assert np.array_equal(sampling_priority(0, 0, np.array([7]), 1, 3),
                          sampling_priority(0, 0, np.arange(10), 1, 3)[7:8])


def test_cuhk03_with_one_image_per_identity_is_the_plain_identity_rank():
    # gallery one image per id in camera 1; queries in camera 0: no sampling freedom
    dist = np.array([[0.3, 0.1, 0.2], [0.1, 0.3, 0.2]], dtype=np.float32)
    res = evaluate_arrays([1, 2], [0, 0], [1, 2, 3], [1, 1, 1], distances=dist,
                          protocol="cuhk03_sgs", options=EvalOptions(max_rank=3, sgs_repeats=4))
    assert res.outcomes.sgs_ranks.tolist() == [[2] * 4, [2] * 4]


def test_camera_split_weighted_mean_equals_union():
    rng = np.random.default_rng(4)
    nq, ng = 120, 500
    q_pids, g_pids = rng.integers(1, 30, nq), rng.integers(1, 30, ng)
    q_cams, g_cams = rng.integers(0, 5, nq), rng.integers(0, 5, ng)
    dist = rng.random((nq, ng)).astype(np.float32)
    res = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=dist,
                          protocol="camera-split", options=EvalOptions(query_cameras=[0, 3]))
    cams = res.per_camera["cameras"]
    assert set(cams) == {"0", "3"}
    assert res.num_queries == int(np.isin(q_cams, [0, 3]).sum())
    ref = reference_eval(dist[np.isin(q_cams, [0, 3])], q_pids[np.isin(q_cams, [0, 3])],
                         q_cams[np.isin(q_cams, [0, 3])], g_pids, g_cams)
    assert res.per_camera["weighted_mean"]["mAP"] == pytest.approx(ref["mAP"], abs=1e-12)
    assert res.mAP == pytest.approx(ref["mAP"], abs=1e-12)


def test_unseen_camera_selection():
    assert unseen_query_cameras([0, 1, 2, 5], None, [1, 2]) == [0, 5]
    assert unseen_query_cameras([0, 1, 2], [2], None) == [2]
    with pytest.raises(EvaluationError, match="query_cams"):
        unseen_query_cameras([0, 1], None, None)
    with pytest.raises(EvaluationError, match="camera"):
        unseen_query_cameras([0, 1], [7], None)


def test_auto_protocol_choice():
    assert auto_protocol(None, None, 1).name == "market"
    assert auto_protocol("market1501", "market", 1).name == "market"
    assert auto_protocol("viper", "market", 10).name == "single-shot"
    assert auto_protocol("sysu_mm01", "sysu", 10).name == "sysu"
    assert auto_protocol("regdb", "regdb", 10).name == "regdb"
    assert auto_protocol("cuhk03", "cuhk03_sgs", 20).name == "cuhk03_sgs"
    assert get_protocol("single_shot").name == "single-shot"
    with pytest.raises(EvaluationError, match="unknown"):
        get_protocol("nope")


def test_identity_codes_separate_domains_and_pid_scopes():
    rec = pd.DataFrame({"pid": [1, 1, 1, 1, 2], "dataset": ["synthetic"] * 4 + ["synthetic"],
                        "domain": ["d0", "d1", "d0", "d0", "d0"],
                        "x_pid_scope": ["all", "all", "all", "test", None]})
    codes = identity_codes(rec)
    assert codes[0] == codes[2]
    assert len({codes[0], codes[1], codes[3], codes[4]}) == 4


def test_same_pid_other_domain_is_not_a_match():
    # gallery pid 1 of another domain is a different person
    dist = np.array([[0.1, 0.2]], dtype=np.float32)
    res = evaluate_arrays([1], [0], [1, 1], [1, 1], distances=dist, query_ids=[10],
                          gallery_ids=[11, 10], options=EvalOptions(max_rank=2))
    assert res.cmc.tolist() == [0.0, 1.0]


def test_identity_codes_of_record_arrays_equal_those_of_the_frame():
    rng = np.random.default_rng(0)
    n = 60
    rec = pd.DataFrame({"pid": rng.integers(-1, 5, n),
                        "dataset": rng.choice(["a", "b"], n).astype(object),
                        "domain": rng.choice(["d0", "d1", "d2"], n).astype(object),
                        "x_pid_scope": rng.choice(["all", "test", None, np.nan], n)})
    arrays = {c: rec[c].to_numpy() for c in rec.columns}

    def pandas_codes(frame):          # the reference: pandas' first-seen group numbers
        keys = ["dataset", "domain", "scope", "pid"]
        frame = frame.assign(scope=frame["x_pid_scope"].fillna("all").astype(str)
                             if "x_pid_scope" in frame else "all")
        return frame.groupby(keys, sort=False).ngroup().tolist()

    assert identity_codes(arrays).tolist() == identity_codes(rec).tolist() == pandas_codes(rec)
    del arrays["x_pid_scope"]
    assert identity_codes(arrays).tolist() == pandas_codes(rec.drop(columns="x_pid_scope"))
    # first-seen order: the first row's identity is 0
    assert identity_codes(arrays)[0] == 0 and identity_codes({"pid": np.zeros(0, int),
                                                               "dataset": np.zeros(0, object),
                                                               "domain": np.zeros(0, object)}
                                                              ).tolist() == []
