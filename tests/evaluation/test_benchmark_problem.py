"""The speed benchmark's problem and per-query reference (small dimension, fast)."""
from __future__ import annotations

import numpy as np

from benchmarks.eval_speed import SIZES, compare, make_problem, reference_rows
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.backend import NumpyBackend
from reidcli.evaluation.distances import FeatureMetric, QueryGallery


def test_market_sized_problem_has_reid_structure_and_engine_matches_reference():
    p = make_problem("market", 8, seed=1)
    spec = SIZES["market"]
    assert len(p["q_pids"]) == spec["queries"] and len(p["g_pids"]) == spec["gallery"]
    assert (p["g_pids"] == 0).sum() == spec["distractors"] and p["q_pids"].min() >= 1
    assert p["qf"].dtype == np.float32 and p["qf"].shape[1] == 8
    # every query has a same-camera gallery image of its id (removed by E1), and ids are
    # seen by 2–6 cameras
    gallery_pairs = set(zip(p["g_pids"].tolist(), p["g_cams"].tolist()))
    assert all(pair in gallery_pairs for pair in zip(p["q_pids"].tolist(), p["q_cams"].tolist()))
    cams_per_id = {pid: len(set(p["g_cams"][p["g_pids"] == pid])) for pid in range(1, 30)}
    assert min(cams_per_id.values()) >= 2 and max(cams_per_id.values()) <= 6
    res = evaluate_arrays(p["q_pids"], p["q_cams"], p["g_pids"], p["g_cams"],
                          query_features=p["qf"], gallery_features=p["gf"])
    subset = np.arange(0, spec["queries"], 17)
    dist = QueryGallery(FeatureMetric("euclidean", NumpyBackend()), p["qf"], p["gf"]).block(subset)
    ref = reference_rows(dist, p["q_pids"][subset], p["q_cams"][subset], p["g_pids"],
                         p["g_cams"])
    per_query = {"first": res.outcomes.first_rank, "ap": res.outcomes.ap,
                 "inp": res.outcomes.inp}
    agreement = compare(per_query, subset, ref["first"], ref["ap"], ref["inp"])
    assert agreement["first_rank_equal"] and agreement["same_valid_queries"]
    assert agreement["max_ap_diff"] < 1e-12 and agreement["max_inp_diff"] < 1e-12
