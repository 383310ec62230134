"""Ranking core: hand-computed CMC/AP/mINP, stable ties, agreement with a per-query reference."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.evaluation import ranking
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.backend import NumpyBackend, TorchBackend
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.errors import EvaluationError
from tests.evaluation.reference import reference_eval


def _one_query(dist, g_pids, g_cams, q_pid=1, q_cam=0, **kw):
    return evaluate_arrays([q_pid], [q_cam], g_pids, g_cams,
                           distances=np.asarray([dist], dtype=np.float32), **kw)


def test_hand_computed_market_rule():
    # gallery in record order: neg, same-cam positive (removed), junk, pos, distractor, pos
    dist = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    g_pids = [2, 1, -1, 1, 0, 1]
    g_cams = [1, 0, 1, 1, 1, 2]
    # list after removal: neg(0) pos(1) distractor(2) pos(3)
    res = _one_query(dist, g_pids, g_cams, options=EvalOptions(max_rank=4))
    assert res.num_valid_queries == 1
    np.testing.assert_allclose(res.cmc, [0, 1, 1, 1])
    assert res.mAP == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert res.mINP == pytest.approx(2 / 4)
    official = _one_query(dist, g_pids, g_cams,
                          options=EvalOptions(max_rank=4, ap_convention="market-official"))
    # positive 1 at rank 1: (0/1 + 1/2)/2; positive 2 at rank 3: (1/3 + 2/4)/2
    assert official.mAP == pytest.approx(((0 + 1 / 2) / 2 + (1 / 3 + 2 / 4) / 2) / 2)


def test_first_rank_positive_gets_precision_one_in_both_conventions():
    for conv in ("sum-of-precisions", "market-official"):
        res = _one_query([0.1, 0.2, 0.3], [1, 2, 1], [1, 1, 1],
                         options=EvalOptions(max_rank=3, ap_convention=conv))
        # ranks 0 and 2
        want = (1 + 2 / 3) / 2 if conv == "sum-of-precisions" else \
            ((1 + 1) / 2 + (1 / 2 + 2 / 3) / 2) / 2
        assert res.mAP == pytest.approx(want)


def test_query_without_match_is_skipped_and_counted():
    dist = np.array([[0.1, 0.2], [0.1, 0.3], [0.2, 0.2]], dtype=np.float32)
    # query 0: only match is same camera → no match; query 1 matches; query 2 is pid 0
    res = evaluate_arrays([1, 2, 0], [0, 0, 0], [1, 2], [0, 1], distances=dist,
                          options=EvalOptions(max_rank=2))
    assert res.num_queries == 3 and res.num_valid_queries == 1
    assert res.skipped == {"no_match": 1, "junk_or_distractor_query": 1}
    np.testing.assert_allclose(res.cmc, [0, 1])   # query 1: g0 (pid 1) ranks before g1


@pytest.mark.parametrize("g_pids, want_rank", [([2, 1, 3], 1), ([1, 2, 3], 0)])
def test_ties_are_broken_by_gallery_order(g_pids, want_rank):
    res = _one_query([0.5, 0.5, 0.9], g_pids, [1, 1, 1], options=EvalOptions(max_rank=3))
    assert int(res.outcomes.first_rank[0]) == want_rank


def test_ties_with_removed_entries_do_not_count():
    # removed same-cam positive tied with the true positive and a negative, all at 0.5
    res = _one_query([0.5, 0.5, 0.5, 0.1], [1, 3, 1, 4], [0, 1, 1, 1],
                     options=EvalOptions(max_rank=3))
    # after removal: g3 (0.1), g1 (0.5, col 1), g2 (0.5, col 2) → positive at rank 2
    assert int(res.outcomes.first_rank[0]) == 2
    assert res.mAP == pytest.approx(1 / 3)


def test_all_equal_distances_rank_in_record_order():
    g_pids = [3, 1, 2, 1, 1]
    res = _one_query(np.zeros(5), g_pids, [1] * 5, options=EvalOptions(max_rank=5))
    ref = reference_eval(np.zeros((1, 5)), [1], [0], g_pids, [1] * 5, max_rank=5)
    assert res.mAP == pytest.approx(ref["mAP"], abs=1e-12)
    assert int(res.outcomes.first_rank[0]) == 1


def _random_problem(rng, nq, ng, n_ids, n_cams, quantize):
    q_pids = rng.integers(1, n_ids + 1, nq)
    q_pids[rng.random(nq) < 0.05] = 0                      # a few distractor queries
    g_pids = rng.integers(1, n_ids + 1, ng)
    g_pids[rng.random(ng) < 0.1] = 0                       # distractors
    g_pids[rng.random(ng) < 0.05] = -1                     # junk
    q_cams = rng.integers(0, n_cams, nq)
    g_cams = rng.integers(0, n_cams, ng)
    dist = rng.random((nq, ng))
    if quantize:
        dist = np.round(dist * quantize) / quantize        # many exact ties
    return dist.astype(np.float32), q_pids, q_cams, g_pids, g_cams


@pytest.mark.parametrize("seed, quantize, block_rows", [(0, 0, 0), (1, 8, 7), (2, 3, 1),
                                                        (3, 50, 64)])
@pytest.mark.parametrize("convention", ["sum-of-precisions", "market-official"])
def test_agrees_with_per_query_reference(seed, quantize, block_rows, convention):
    rng = np.random.default_rng(seed)
    dist, q_pids, q_cams, g_pids, g_cams = _random_problem(rng, 90, 400, 25, 4, quantize)
    opts = EvalOptions(max_rank=60, ap_convention=convention, block_rows=block_rows)
    res = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=dist, options=opts)
    ref = reference_eval(dist, q_pids, q_cams, g_pids, g_cams, max_rank=60, ap=convention)
    out = res.outcomes
    assert np.array_equal(out.valid, ref["valid"])
    assert np.array_equal(out.first_rank[out.valid], ref["first"][ref["valid"]])
    np.testing.assert_allclose(out.ap[out.valid], ref["ap"][ref["valid"]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.inp[out.valid], ref["inp"][ref["valid"]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.cmc, ref["cmc"], rtol=0, atol=1e-12)
    assert res.mAP == pytest.approx(ref["mAP"], abs=1e-9)
    assert res.mINP == pytest.approx(ref["mINP"], abs=1e-9)


def test_float64_distances_and_negative_values():
    rng = np.random.default_rng(5)
    dist, q_pids, q_cams, g_pids, g_cams = _random_problem(rng, 40, 150, 10, 3, 0)
    dist = (dist.astype(np.float64) - 0.5) * 1e-3           # negative, closely spaced
    res = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=dist)
    ref = reference_eval(dist, q_pids, q_cams, g_pids, g_cams)
    assert res.mAP == pytest.approx(ref["mAP"], abs=1e-12)
    np.testing.assert_allclose(res.cmc, ref["cmc"], atol=1e-12)


def test_torch_backend_matches_numpy_backend():
    rng = np.random.default_rng(7)
    dist, q_pids, q_cams, g_pids, g_cams = _random_problem(rng, 50, 300, 12, 3, 10)
    lab = dict(query_pids=q_pids, query_cams=q_cams, gallery_pids=g_pids, gallery_cams=g_cams)
    from reidcli.evaluation.distances import MatrixDistances
    from reidcli.evaluation.engine import evaluate_trial
    from reidcli.evaluation.protocols import TrialLabels, get_protocol
    labels = TrialLabels.from_arrays(**lab)
    a = evaluate_trial(MatrixDistances(dist), labels, get_protocol("market"),
                       backend=NumpyBackend(threads=2))
    b = evaluate_trial(MatrixDistances(dist), labels, get_protocol("market"),
                       backend=TorchBackend("cpu"))
    np.testing.assert_array_equal(a.outcomes.first_rank, b.outcomes.first_rank)
    np.testing.assert_allclose(a.outcomes.ap, b.outcomes.ap, atol=1e-15)


def test_threaded_row_sort_and_batched_search():
    rng = np.random.default_rng(3)
    d = rng.integers(0, 20, (37, 1000)).astype(np.float32)
    be = NumpyBackend(threads=3)
    s = be.sort_rows(d)
    np.testing.assert_array_equal(s, np.sort(d, axis=1))
    vals = rng.integers(-1, 22, (37, 5)).astype(np.float32)
    for right in (False, True):
        want = np.stack([np.searchsorted(s[i], vals[i], side="right" if right else "left")
                         for i in range(37)])
        np.testing.assert_array_equal(be.searchsorted(s, vals, right=right), want)
    be.close()


def test_cmc_curve_counts_first_ranks():
    np.testing.assert_allclose(ranking.cmc_curve(np.array([0, 2, 2, 9]), 4),
                               [0.25, 0.25, 0.75, 0.75])


def test_no_valid_query_is_an_error():
    with pytest.raises(EvaluationError, match="has a match"):
        evaluate_arrays([1], [0], [2, 3], [1, 1], distances=np.zeros((1, 2)))


def test_nan_distances_are_an_error():
    with pytest.raises(EvaluationError, match="NaN"):
        evaluate_arrays([1], [0], [1, 3], [1, 1], distances=np.array([[0.1, np.nan]]))


@pytest.mark.parametrize("protocol", ["market", "sysu", "cuhk03_sgs"])
def test_torch_feature_path_matches_numpy_path(protocol):
    from reidcli.evaluation.distances import FeatureMetric, QueryGallery
    from reidcli.evaluation.engine import evaluate_trial
    from reidcli.evaluation.protocols import TrialLabels, get_protocol
    rng = np.random.default_rng(11)
    qf, gf = rng.standard_normal((40, 6)), rng.standard_normal((150, 6))
    labels = TrialLabels.from_arrays(rng.integers(1, 10, 40), rng.choice([2, 5], 40),
                                     rng.integers(1, 10, 150), rng.choice([0, 1, 3], 150))
    results = []
    for backend in (NumpyBackend(), TorchBackend("cpu")):
        source = QueryGallery(FeatureMetric("euclidean", backend), qf, gf)
        results.append(evaluate_trial(source, labels, get_protocol(protocol),
                                      EvalOptions(max_rank=10, block_rows=16), backend=backend))
    np.testing.assert_array_equal(results[0].outcomes.first_rank, results[1].outcomes.first_rank)
    np.testing.assert_allclose(results[0].cmc, results[1].cmc)
