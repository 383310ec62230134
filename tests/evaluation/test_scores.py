"""PUR, CMC-AUC and the camera-bias NMI."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.engine import EvalOptions
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.scores import cmc_auc, nmi_camera_bias, pur


def test_pur_perfect_and_uniform():
    assert pur(np.ones(50), 50) == pytest.approx(1.0)
    uniform = np.arange(1, 51) / 50                    # M(r) = 1/N_g for every rank
    assert pur(uniform, 50) == pytest.approx(0.0, abs=1e-12)
    half = np.concatenate([[0.5], np.ones(9)])          # M = (0.5, 0.5, 0, ...)
    assert pur(half, 10) == pytest.approx((np.log(10) + np.log(0.5)) / np.log(10))
    assert pur(np.ones(1), 1) is None


def test_pur_counts_distractors_in_gallery_size():
    # GRID-like: 5 probes, 5 matching ids + distractors (pid 0) in a gallery of 9
    rng = np.random.default_rng(0)
    g_pids = np.array([1, 2, 3, 4, 5, 0, 0, 0, 0])
    dist = rng.random((5, 9)).astype(np.float32)
    res = evaluate_arrays([1, 2, 3, 4, 5], [0] * 5, g_pids, [1] * 9, distances=dist,
                          protocol="single-shot", options=EvalOptions(max_rank=9))
    assert res.gallery_size == 9 and len(res.cmc_full) == 9
    assert res.pur == pytest.approx(pur(res.cmc_full, 9))
    assert res.auc == pytest.approx(res.cmc_full.mean())


def test_cmc_auc_mean_over_ranks():
    curve = np.array([0.5, 0.75, 1.0, 1.0])
    assert cmc_auc(curve) == pytest.approx(0.8125)
    assert cmc_auc(curve, 2) == pytest.approx(0.625)
    assert cmc_auc(curve, 6) == pytest.approx((0.5 + 0.75 + 4) / 6)
    with pytest.raises(EvaluationError):
        cmc_auc(curve, 0)


def test_nmi_of_camera_clusters_is_one_and_of_unrelated_features_near_zero():
    rng = np.random.default_rng(1)
    cams = np.repeat(np.arange(4), 50)
    centers = rng.standard_normal((4, 16)) * 5
    biased = centers[cams] + 0.1 * rng.standard_normal((200, 16))
    assert nmi_camera_bias(biased, cams)["nmi"] == pytest.approx(1.0)
    unrelated = rng.standard_normal((200, 16))
    assert nmi_camera_bias(unrelated, cams)["nmi"] < 0.1
    out = nmi_camera_bias(biased, cams, pids=np.arange(200) % 10, k="ids")
    assert out["k"] == 10 and out["restarts"] == 5


def test_nmi_subsamples_and_rejects_bad_k():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((300, 4))
    cams = rng.integers(0, 3, 300)
    assert nmi_camera_bias(x, cams, sample_limit=100)["num_samples"] == 100
    with pytest.raises(EvaluationError, match="nmi_k='many'"):
        nmi_camera_bias(x, cams, k="many")
