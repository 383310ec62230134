"""k-reciprocal re-ranking: block-wise sparse version vs a dense reading of the paper."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from reidcli.fitted import TrialModel
from reidcli.evaluation.backend import NumpyBackend
from scipy.spatial.distance import cdist

from reidcli.evaluation.distances import FeatureMetric, ModelMetric
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.rerank import (KReciprocalReranker, RerankOptions, _merge_candidates,
                                       expansion_sets, stable_smallest)


def dense_rerank(dist_all: np.ndarray, num_query: int, k1: int, k2: int, lam: float):
    """Dense N×N k-reciprocal re-ranking, step by step as in Zhong et al. (float64)."""
    n = dist_all.shape[0]
    a = dist_all.astype(np.float64) ** 2
    a = a / a.max(axis=1, keepdims=True)
    rank = np.argsort(a, axis=1, kind="stable")
    half = int(np.around(k1 / 2.0))
    V = np.zeros((n, n))

    def reciprocal(i, k):
        fwd = rank[i, :k + 1]
        return np.array([j for j in fwd if i in rank[j, :k + 1]], dtype=int)

    for i in range(n):
        r = reciprocal(i, k1)
        expansion = list(r)
        for c in r:
            rc = reciprocal(c, half)
            if len(np.intersect1d(rc, r)) > 2.0 / 3.0 * len(rc):
                expansion.extend(rc)
        expansion = np.unique(expansion)
        w = np.exp(-a[i, expansion])
        V[i, expansion] = w / w.sum()
    if k2 != 1:
        V = np.stack([V[rank[i, :k2]].mean(axis=0) for i in range(n)])
    jac = np.zeros((num_query, n))
    for i in range(num_query):
        s = np.minimum(V[i][None, :], V).sum(axis=1)
        jac[i] = 1 - s / (2 - s)
    final = jac * (1 - lam) + a[:num_query] * lam
    return final[:, num_query:]


def _features(seed, nq, ng, dim=8, ids=12):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((ids, dim))
    q = centers[rng.integers(0, ids, nq)] + 0.6 * rng.standard_normal((nq, dim))
    g = centers[rng.integers(0, ids, ng)] + 0.6 * rng.standard_normal((ng, dim))
    return q.astype(np.float32), g.astype(np.float32)


@pytest.mark.parametrize("seed, nq, ng, k1, k2, lam, metric", [
    (0, 40, 160, 20, 6, 0.3, "euclidean"),
    (1, 60, 240, 8, 3, 0.5, "cosine"),
    (2, 25, 100, 5, 1, 0.3, "sqeuclidean"),
])
def test_matches_dense_reference(seed, nq, ng, k1, k2, lam, metric):
    qf, gf = _features(seed, nq, ng)
    m = FeatureMetric(metric, NumpyBackend())
    rr = KReciprocalReranker(m, qf, gf, RerankOptions(k1, k2, lam), block_elements=3000)
    got = np.concatenate([rr.block(np.arange(s, min(nq, s + 7))) for s in range(0, nq, 7)])
    pts = m.prepare(np.concatenate([qf, gf]))
    want = dense_rerank(m.pairwise(pts, pts), nq, k1, k2, lam)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # a gallery subset is the matching columns
    cols = np.arange(0, ng, 3)
    np.testing.assert_allclose(rr.block(np.arange(5), cols), want[:5, cols], atol=1e-6)


class _EuclideanModel(TrialModel):
    """A fitted model defining only its own distance (no paired distances)."""

    metric = "model-euclidean"

    def embedded_distance(self, q, g):
        return cdist(q, g)


@pytest.mark.parametrize("use_model", [False, True])
def test_distances_beyond_stored_neighbours_are_recomputed(use_model):
    qf, gf = _features(4, 30, 120)
    m = ModelMetric(_EuclideanModel(), NumpyBackend()) if use_model else \
        FeatureMetric("euclidean", NumpyBackend())
    rr = KReciprocalReranker(m, qf, gf, RerankOptions(10, 4, 0.3), stored_neighbours=11,
                             block_elements=2000)
    assert rr.recomputed_pairs > 0
    assert (rr.recomputed_rows > 0) == use_model
    pts = m.prepare(np.concatenate([qf, gf]))
    np.testing.assert_allclose(rr.block(np.arange(30)),
                               dense_rerank(m.pairwise(pts, pts), 30, 10, 4, 0.3), atol=1e-6)


def test_sparse_weights_rows_sum_to_one_and_stay_sparse():
    qf, gf = _features(3, 50, 250)
    rr = KReciprocalReranker(FeatureMetric("euclidean", NumpyBackend()), qf, gf)
    np.testing.assert_allclose(np.asarray(rr.V.sum(axis=1)).ravel(), 1.0, atol=1e-12)
    assert rr.V.nnz < 0.5 * rr.V.shape[0] ** 2


def test_stable_smallest_breaks_ties_by_column():
    v = np.array([[3.0, 1.0, 1.0, 0.0, 1.0, 5.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                  [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    cols, vals = stable_smallest(v, 3)
    np.testing.assert_array_equal(cols, [[3, 1, 2], [0, 1, 2], [5, 4, 3]])
    np.testing.assert_array_equal(vals, [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 2.0, 3.0]])
    rng = np.random.default_rng(0)
    many = np.round(rng.random((20, 50)) * 6)
    cols, _ = stable_smallest(many, 9)
    np.testing.assert_array_equal(cols, np.argsort(many, axis=1, kind="stable")[:, :9])


def test_expansion_sets_on_two_clusters():
    # two well separated groups of 4: every item's reciprocal set is its own group
    x = np.array([[0.0], [0.1], [0.2], [0.3], [10.0], [10.1], [10.2], [10.3]])
    d = np.abs(x - x.T)
    initial = np.argsort(d, axis=1, kind="stable")
    indptr, members = expansion_sets(initial, 3)
    for i in range(8):
        got = set(members[indptr[i]:indptr[i + 1]].tolist())
        assert got == set(range(4)) if i < 4 else got == set(range(4, 8))


def test_bad_options_are_user_errors():
    with pytest.raises(EvaluationError, match="lambda"):
        RerankOptions(lambda_value=2.0).validate()


def _all_rows(rr, num_query, step=7):
    return np.concatenate([rr.block(np.arange(s, min(num_query, s + step)))
                           for s in range(0, num_query, step)])


@pytest.mark.parametrize("block_elements", [1, 26, 50, 1369, 1444])
def test_symmetric_tiles_match_dense_reference_at_odd_tile_sizes(block_elements):
    # N = 37 items in tiles of 1, 5, 7, 37 (one tile) and 38 (wider than N) rows; 21 stored
    # neighbours per item exceed the 5- and 7-wide tiles, so lists from many tiles are merged
    qf, gf = _features(5, 9, 28)
    m = FeatureMetric("euclidean", NumpyBackend())
    rr = KReciprocalReranker(m, qf, gf, RerankOptions(6, 3, 0.3), block_elements=block_elements)
    assert rr.symmetric
    pts = m.prepare(np.concatenate([qf, gf]))
    want = dense_rerank(m.pairwise(pts, pts), 9, 6, 3, 0.3)
    np.testing.assert_allclose(_all_rows(rr, 9), want, rtol=0, atol=1e-6)


def test_symmetric_tiles_on_torch_blocks_match_dense_reference():
    from reidcli.evaluation.backend import TorchBackend
    qf, gf = _features(8, 11, 30)
    m = FeatureMetric("cosine", TorchBackend("cpu"))
    rr = KReciprocalReranker(m, qf, gf, RerankOptions(6, 3, 0.3), block_elements=81)
    assert rr.symmetric
    pts = m.prepare(np.concatenate([qf, gf]))
    want = dense_rerank(m.pairwise(pts, pts).numpy(), 11, 6, 3, 0.3)
    np.testing.assert_allclose(_all_rows(rr, 11), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_symmetric_and_row_passes_agree_exactly_on_ties(metric):
    # integer features: every distance is exact (no rounding) and many are equal, so both
    # passes must rank ties by index alike and give bit-identical re-ranked distances
    rng = np.random.default_rng(7)
    qf = rng.integers(-1, 2, (14, 4)).astype(np.float32)
    gf = rng.integers(-1, 2, (47, 4)).astype(np.float32)
    m = FeatureMetric(metric, NumpyBackend())
    opts = RerankOptions(5, 3, 0.3)
    tiles = KReciprocalReranker(m, qf, gf, opts, block_elements=60)      # 7-row tiles
    rows = KReciprocalReranker(m, qf, gf, opts, block_elements=60, symmetric=False)
    assert tiles.symmetric and not rows.symmetric
    np.testing.assert_array_equal(tiles.initial, rows.initial)
    np.testing.assert_array_equal(tiles.initial_sq, rows.initial_sq)
    np.testing.assert_array_equal(tiles.row_max, rows.row_max)
    got = _all_rows(tiles, 14)
    np.testing.assert_array_equal(got, _all_rows(rows, 14))
    pts = m.prepare(np.concatenate([qf, gf]))
    np.testing.assert_allclose(got, dense_rerank(m.pairwise(pts, pts), 14, 5, 3, 0.3),
                               rtol=0, atol=1e-6)


def test_model_metrics_use_the_row_pass_unless_told():
    qf, gf = _features(6, 10, 40)
    model = ModelMetric(_EuclideanModel(), NumpyBackend())
    assert not KReciprocalReranker(model, qf, gf, RerankOptions(5, 2, 0.3)).symmetric
    forced = KReciprocalReranker(model, qf, gf, RerankOptions(5, 2, 0.3), symmetric=True,
                                 block_elements=100)
    assert forced.symmetric
    pts = model.prepare(np.concatenate([qf, gf]))
    np.testing.assert_allclose(_all_rows(forced, 10),
                               dense_rerank(model.pairwise(pts, pts), 10, 5, 2, 0.3), atol=1e-6)


def test_merge_candidates_is_a_stable_ranking_of_the_concatenation():
    rng = np.random.default_rng(1)
    sq = np.round(rng.random((6, 30)) * 5)                    # many ties
    items = np.arange(30)
    lists = []
    for lo, hi in [(0, 4), (4, 13), (13, 14), (14, 30)]:      # column ranges, increasing
        cols, vals = stable_smallest(sq[:, lo:hi], 8)     # each list: its 8 nearest
        lists.append((cols + lo, vals))
    got_items, got_sq = _merge_candidates(lists, 8)
    want = np.argsort(sq, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(got_items, items[want])
    np.testing.assert_array_equal(got_sq, np.take_along_axis(sq, want, axis=1))


def test_module_does_not_import_scipy_sparse():
    code = ("import sys, reidcli.evaluation.rerank, reidcli.evaluation.run; "
            "sys.exit('scipy.sparse' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
