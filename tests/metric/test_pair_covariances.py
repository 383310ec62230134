"""Closed-form cross-camera pair covariances (docs/methods/cdpcf.md invariant 1)."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import UsageError
from reidcli.metric.pair_covariances import (PairCovarianceAccumulator,
                                             cross_camera_pair_covariances)


def brute_force(q, pids, camids, weights=None):
    """Σ_S, Σ_D, N_S, N_D by enumerating every ordered cross-camera pair (i, j)."""
    n, _, t = q.shape
    w = np.ones(n) if weights is None else weights
    same, diff = np.zeros((t, t)), np.zeros((t, t))
    n_same = n_diff = 0.0
    for i in range(n):
        for j in range(n):
            if camids[i] == camids[j]:
                continue
            d = q[i] - q[j]
            term = w[i] * w[j] * (d.T @ d)
            if pids[i] == pids[j]:
                same += term
                n_same += w[i] * w[j]
            else:
                diff += term
                n_diff += w[i] * w[j]
    return same / n_same, diff / n_diff, n_same, n_diff


def _uneven(seed=0, persons=7, cameras=3, n=60, rows=3, cols=5):
    """Random Q with C cameras and uneven multi-shot counts (some persons in one camera)."""
    rng = np.random.default_rng(seed)
    pids = rng.integers(10, 10 + persons, n)
    camids = rng.integers(0, cameras, n) * 2 + 1          # non-contiguous camera ids
    q = rng.standard_normal((n, rows, cols)) + 0.5
    return q, pids, camids


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("chunk", [256, 4])
def test_closed_form_equals_pair_enumeration(device, chunk):
    if device is not None:
        pytest.importorskip("torch")
    q, pids, camids = _uneven()
    want_s, want_d, n_s, n_d = brute_force(q, pids, camids)
    cov = cross_camera_pair_covariances(q, pids, camids, device=device, chunk=chunk)
    assert _rel(cov.sigma_same, want_s) < 1e-10
    assert _rel(cov.sigma_diff, want_d) < 1e-10
    assert (cov.n_same, cov.n_diff) == (int(n_s), int(n_d))
    assert isinstance(cov.n_same, int) and cov.sigma_same.shape == (5, 5)
    np.testing.assert_array_equal(cov.sigma_same, cov.sigma_same.T)


def test_many_cameras_and_weights_and_streaming():
    # C = 5: the cross sums take the Y_p^T Y_p − Σ Y_{p,c}^T Y_{p,c} route
    q, pids, camids = _uneven(1, persons=4, cameras=5, n=50, rows=2, cols=4)
    want_s, want_d, n_s, n_d = brute_force(q, pids, camids)
    cov = cross_camera_pair_covariances(q, pids, camids)
    assert _rel(cov.sigma_same, want_s) < 1e-10 and _rel(cov.sigma_diff, want_d) < 1e-10
    assert (cov.n_same, cov.n_diff) == (n_s, n_d)
    # per-image weights: pair (i, j) counts w_i·w_j
    w = np.random.default_rng(2).uniform(0.1, 2.0, len(q))
    want_s, want_d, n_s, n_d = brute_force(q, pids, camids, w)
    cov = cross_camera_pair_covariances(q, pids, camids, weights=w)
    assert _rel(cov.sigma_same, want_s) < 1e-10 and _rel(cov.sigma_diff, want_d) < 1e-10
    assert cov.n_same == pytest.approx(n_s, rel=1e-12) and cov.n_diff == pytest.approx(n_d)
    # blocks added in any order give the same result
    acc = PairCovarianceAccumulator(pids, camids, chunk=3)
    for block in np.array_split(np.random.default_rng(3).permutation(len(q)), 4):
        acc.add(block, q[block])
    streamed = acc.result()
    whole = cross_camera_pair_covariances(q, pids, camids)
    assert _rel(streamed.sigma_same, whole.sigma_same) < 1e-12
    assert _rel(streamed.sigma_diff, whole.sigma_diff) < 1e-12


def test_single_row_is_the_vector_case_and_balanced_offsets_cancel():
    rng = np.random.default_rng(4)
    persons = 9
    pids = np.repeat(np.arange(persons), 4)                 # 2 images per camera per person
    camids = np.tile([0, 0, 1, 1], persons)
    x = rng.standard_normal((len(pids), 6))
    cov = cross_camera_pair_covariances(x[:, None, :], pids, camids)
    want_s, want_d, _, _ = brute_force(x[:, None, :], pids, camids)
    assert _rel(cov.sigma_same, want_s) < 1e-10 and _rel(cov.sigma_diff, want_d) < 1e-10
    # balanced: a per-camera offset cancels in Σ_D − Σ_S (docs/methods/cdpcf.md)
    shifted = x + np.where(camids == 1, 1.0, 0.0)[:, None] * rng.standard_normal(6)
    other = cross_camera_pair_covariances(shifted[:, None, :], pids, camids)
    base = cov.sigma_diff - cov.sigma_same
    assert _rel(other.sigma_diff - other.sigma_same, base) < 1e-10


def test_errors_name_what_is_missing():
    q = np.zeros((4, 1, 3))
    with pytest.raises(UsageError, match="no same-person cross-camera pairs"):
        cross_camera_pair_covariances(q, [1, 1, 2, 2], [0, 0, 1, 1])
    with pytest.raises(UsageError, match="no same-person cross-camera pairs"):
        cross_camera_pair_covariances(q, [1, 2, 1, 2], [0, 0, 0, 0])
    with pytest.raises(UsageError, match="no different-person cross-camera pairs"):
        cross_camera_pair_covariances(q, [1, 1, 1, 1], [0, 1, 0, 1])
    with pytest.raises(UsageError, match="trial 3 has no different-person"):
        cross_camera_pair_covariances(q, [1, 1, 1, 1], [0, 1, 0, 1], context="trial 3")
    with pytest.raises(UsageError, match=r"\[N, E, T\]"):
        cross_camera_pair_covariances(np.zeros((4, 3)), [1, 1, 2, 2], [0, 1, 0, 1])
    with pytest.raises(UsageError, match="4 images but 3 pids"):
        cross_camera_pair_covariances(q, [1, 1, 2], [0, 1, 0, 1])
    bad = q.copy()
    bad[2, 0, 1] = np.nan
    with pytest.raises(UsageError, match="NaN"):
        cross_camera_pair_covariances(bad, [1, 1, 2, 2], [0, 1, 0, 1])
    with pytest.raises(UsageError, match="weights"):
        cross_camera_pair_covariances(q, [1, 1, 2, 2], [0, 1, 0, 1], weights=[1, -1, 1, 1])
    acc = PairCovarianceAccumulator([1, 1, 2, 2], [0, 1, 0, 1])
    acc.add([0, 1], q[:2])
    with pytest.raises(UsageError, match="added twice"):
        acc.add([1], q[:1])
    with pytest.raises(UsageError, match="never added"):
        acc.result()
