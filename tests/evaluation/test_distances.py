"""Block-wise distances: values, feature checks, normalisation."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from reidcli.evaluation.backend import NumpyBackend, TorchBackend
from reidcli.evaluation.distances import (FeatureMetric, MatrixDistances, QueryGallery,
                                          check_features, normalize_features)
from reidcli.evaluation.errors import EvaluationError


@pytest.mark.parametrize("name, scipy_name, power", [("euclidean", "euclidean", 1),
                                                     ("sqeuclidean", "euclidean", 2),
                                                     ("cosine", "cosine", 1)])
@pytest.mark.parametrize("backend", [NumpyBackend(), TorchBackend("cpu")])
def test_metrics_match_scipy(name, scipy_name, power, backend):
    rng = np.random.default_rng(0)
    q, g = rng.standard_normal((7, 5)), rng.standard_normal((11, 5))
    qg = QueryGallery(FeatureMetric(name, backend), q, g)
    got = backend.to_numpy(qg.block(np.arange(2, 6), np.array([0, 3, 4, 10])))
    want = cdist(q[2:6], g[[0, 3, 4, 10]], scipy_name) ** power
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_feature_checks():
    with pytest.raises(EvaluationError, match="NaN or Inf"):
        check_features(np.array([[1.0, np.inf], [0.0, 1.0]]), "query features")
    with pytest.raises(EvaluationError, match="shape"):
        check_features(np.zeros(3), "x")
    with pytest.raises(EvaluationError, match="dimension"):
        QueryGallery(FeatureMetric("euclidean", NumpyBackend()), np.zeros((2, 3)),
                     np.zeros((2, 4)))
    with pytest.raises(EvaluationError, match="unknown"):
        FeatureMetric("manhattan", NumpyBackend())


def test_feature_normalisation_global_and_parts():
    x = np.array([[3.0, 4.0, 0.0, 2.0]], dtype=np.float32)
    np.testing.assert_allclose(normalize_features(x, "global"), x / np.sqrt(29), rtol=1e-6)
    np.testing.assert_allclose(normalize_features(x, "parts", 2), [[0.6, 0.8, 0.0, 1.0]],
                               rtol=1e-6)
    with pytest.raises(EvaluationError, match="n_parts=3"):
        normalize_features(x, "parts", 3)


def test_matrix_source_selects_rows_and_columns():
    d = np.arange(20, dtype=np.float32).reshape(4, 5)
    src = MatrixDistances(d)
    np.testing.assert_array_equal(src.block(np.array([1, 2]), np.array([0, 4])),
                                  [[5, 9], [10, 14]])
    np.testing.assert_array_equal(src.block(np.array([3, 0])), d[[3, 0]])


def test_device_resolution(monkeypatch):
    from reidcli.evaluation import backend
    assert backend.resolve_device("cpu") == "cpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert backend.resolve_device("auto") == "cpu"
    from reidcli.errors import ParameterError
    with pytest.raises(ParameterError, match="device='tpu'"):
        backend.resolve_device("tpu")


def test_one_pass_checks_refuse_exactly_what_the_float64_checks_refuse():
    from reidcli.evaluation.distances import MAX_SQNORM, check_magnitude

    limit = np.sqrt(MAX_SQNORM)                     # per-row L2 norm limit (≈ 9.2e18)
    rng = np.random.default_rng(0)
    feats = rng.standard_normal((50, 8)).astype(np.float32)
    feats[7] = limit / np.sqrt(8) * 0.999          # just under: accepted (float64 check)
    feats[9] = limit / np.sqrt(8) * 0.6
    assert check_features(feats, "x") is feats
    feats[11] = limit / np.sqrt(8) * 1.001          # just over: refused, first at 11
    feats[30, 2] = 4e19                             # over in one value
    with pytest.raises(EvaluationError, match=r"x: 2 row\(s\) .*too large.*position 11\)"):
        check_features(feats, "x")
    with pytest.raises(EvaluationError, match=r"2 row\(s\) .*position 11\)"):
        check_magnitude(feats, "x")
    feats[40, 0], feats[3, 1] = np.nan, -np.inf     # NaN/Inf reported first, all of them
    with pytest.raises(EvaluationError, match=r"x: 2 row\(s\) hold NaN or Inf .*position 3\)"):
        check_features(feats, "x")
    assert check_features(feats[:3], "x", magnitude=False).shape == (3, 8)


@pytest.mark.parametrize("name", ["euclidean", "sqeuclidean", "cosine"])
def test_blocks_written_into_a_reused_buffer_are_the_same_bits(name):
    rng = np.random.default_rng(4)
    qf, gf = rng.normal(size=(30, 12)), rng.normal(size=(50, 12))
    qg = QueryGallery(FeatureMetric(name, NumpyBackend()), qf, gf)
    buffer = np.full(40 * 50, np.nan, dtype=np.float32)
    for rows in (np.arange(0, 20), np.arange(20, 30)):
        out = buffer[:len(rows) * 50].reshape(len(rows), 50)
        block = qg.block(rows, None, out=out)
        assert np.shares_memory(block, buffer)
        np.testing.assert_array_equal(block, qg.block(rows, None))
    with pytest.raises(ValueError, match="out must be"):
        qg.block(np.arange(3), None, out=np.empty((3, 49), dtype=np.float32))
