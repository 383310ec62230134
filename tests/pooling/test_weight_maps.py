"""Closed-form cross-camera pair statistics and weight maps (docs/methods/cdpcf.md)."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import UsageError
from reidcli.pooling.weight_maps import (CrossCameraScatter, camera_block_covariances,
                                         top_eigenvectors)


def _brute_force(q, pids, camids, camera_specific):
    """Σ_S, Σ_D by enumerating every ordered cross-camera pair (the definition, Eq. 9)."""
    n, e, s = q.shape
    cams = np.unique(camids)
    t = len(cams) * s if camera_specific else s
    big = np.zeros((n, e, t))
    for i in range(n):
        c = int(np.searchsorted(cams, camids[i])) if camera_specific else 0
        big[i, :, c * s:(c + 1) * s] = q[i]
    same, diff, n_same, n_diff = np.zeros((t, t)), np.zeros((t, t)), 0, 0
    for i in range(n):
        for j in range(n):
            if camids[i] == camids[j]:
                continue
            d = big[i] - big[j]
            if pids[i] == pids[j]:
                same += d.T @ d
                n_same += 1
            else:
                diff += d.T @ d
                n_diff += 1
    return same / n_same, diff / n_diff, n_same, n_diff


@pytest.mark.parametrize("camera_specific", [False, True])
def test_closed_form_equals_pair_enumeration(camera_specific):
    rng = np.random.default_rng(3)
    pids = np.array([1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5, 6, 6, 6, 7])
    camids = np.array([0, 1, 2, 0, 0, 1, 2, 2, 0, 1, 0, 2, 1, 1, 0, 2])
    q = rng.standard_normal((len(pids), 3, 5))
    cov = camera_block_covariances(q, pids, camids, camera_specific=camera_specific)
    same, diff, n_same, n_diff = _brute_force(q, pids, camids, camera_specific)
    assert (cov.n_same, cov.n_diff) == (n_same, n_diff)
    np.testing.assert_allclose(cov.sigma_same, same, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cov.sigma_diff, diff, rtol=1e-10, atol=1e-12)


def test_streaming_in_any_chunk_order_matches_one_shot():
    rng = np.random.default_rng(0)
    pids = rng.integers(1, 8, 40)
    camids = rng.integers(0, 3, 40)
    q = rng.standard_normal((40, 2, 6))
    whole = camera_block_covariances(q, pids, camids, camera_specific=True)
    acc = CrossCameraScatter(pids, camids, 6, camera_specific=True)
    order = rng.permutation(40)
    for part in np.array_split(order, 5):
        acc.add(part, q[part])
    got = acc.result()
    np.testing.assert_allclose(got.sigma_diff, whole.sigma_diff, rtol=1e-12)
    with pytest.raises(ValueError, match="added twice"):
        acc.add(order[:1], q[order[:1]])
    partial = CrossCameraScatter(pids, camids, 6)
    partial.add(np.arange(3), q[:3])
    with pytest.raises(ValueError, match="never added"):
        partial.result()


def test_balanced_two_camera_structure():
    """Balanced single-shot, C = 2: zero diagonal blocks, ±-symmetric spectrum, ‖w^c‖ = 1/√2."""
    rng = np.random.default_rng(1)
    persons, s = 30, 8
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    q = rng.standard_normal((2 * persons, 4, s))
    cov = camera_block_covariances(q, pids, camids, camera_specific=True)
    diff = cov.sigma_diff - cov.sigma_same
    scale = np.abs(diff).max()
    assert np.abs(diff[:s, :s]).max() <= 1e-12 * scale
    assert np.abs(diff[s:, s:]).max() <= 1e-12 * scale
    values = np.linalg.eigvalsh(diff)
    np.testing.assert_allclose(np.sort(values), np.sort(-values), atol=1e-10 * scale)
    weights, top = top_eigenvectors(cov, 3)
    np.testing.assert_allclose(np.linalg.norm(weights[:s], axis=0), np.sqrt(0.5), atol=1e-8)
    np.testing.assert_allclose(weights.T @ weights, np.eye(3), atol=1e-10)
    assert np.all(np.diff(top) <= 0)
    peak = np.abs(weights).argmax(axis=0)
    assert np.all(weights[peak, np.arange(3)] > 0)          # sign convention


def test_offsets_cancel_only_for_balanced_data():
    rng = np.random.default_rng(2)
    persons, s = 25, 6
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    q = rng.standard_normal((2 * persons, 3, s))

    def gap(qq, p=pids, c=camids):
        cov = camera_block_covariances(qq, p, c, camera_specific=False)
        return cov.sigma_diff - cov.sigma_same

    base = gap(q)
    offset = rng.standard_normal((3, s))
    np.testing.assert_allclose(gap(q + offset), base, rtol=1e-10, atol=1e-10)
    one_cam = q.copy()
    one_cam[camids == 1] += offset
    np.testing.assert_allclose(gap(one_cam), base, rtol=1e-10, atol=1e-10)
    keep = np.arange(len(pids)) % 7 != 0                       # unbalanced
    a = gap(q[keep], pids[keep], camids[keep])
    b = gap(one_cam[keep], pids[keep], camids[keep])
    assert np.abs(a - b).max() > 1e-3 * np.abs(a).max()


def test_errors_name_the_problem():
    with pytest.raises(UsageError, match="no same-person cross-camera pairs"):
        CrossCameraScatter(np.array([1, 2, 3]), np.array([0, 1, 0]), 4)
    with pytest.raises(UsageError, match="no different-person"):
        CrossCameraScatter(np.array([1, 1]), np.array([0, 1]), 4)
    cov = camera_block_covariances(np.ones((4, 1, 3)), np.array([1, 1, 2, 2]),
                                        np.array([0, 1, 0, 1]))
    with pytest.raises(UsageError, match="K=4 is out of range"):
        top_eigenvectors(cov, 4)


@pytest.mark.parametrize("grid", [(3, 1), (2, 2)])            # stripes; non-contiguous areas
def test_add_maps_matches_add_of_projected_maps_and_not_the_thread_count(grid, monkeypatch):
    """The fused path (project R^T F* and accumulate per task, issue 32) gives the statistics
    of add(project_maps(...)) up to float32 rounding, unbalanced weights and a chunk cut
    mid-person included, and the same bits on 1 and 2 threads (fixed tasks, fixed order)."""
    import torch

    from reidcli.pooling import weight_maps
    from reidcli.pooling.geometry import area_positions, position_areas
    from reidcli.pooling.projection import project_maps, random_orthonormal_projection

    monkeypatch.setattr(weight_maps, "TASK_IMAGES", 4)            # several tasks per chunk
    monkeypatch.setattr(weight_maps, "TASK_BLOCK_BYTES", 600)     # several blocks per task
    rng = np.random.default_rng(5)
    pids = rng.integers(1, 6, 23)
    camids = rng.integers(0, 2, 23)
    maps = rng.standard_normal((23, 8, 6, 4)).astype(np.float16)
    positions = area_positions(position_areas(6, 4, grid))
    proj = random_orthonormal_projection(len(positions) * 8, 5, 0, 0)
    ref = CrossCameraScatter(pids, camids, 24, camera_specific=True)
    ref.add(np.arange(23), project_maps(maps, proj, positions))
    ref = ref.result()

    def fused():
        acc = CrossCameraScatter(pids, camids, 24, camera_specific=True)
        for part in (np.arange(0, 13), np.arange(13, 23)):
            acc.add_maps(part, maps[part], proj, positions)
        return acc.result()

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fused()
        torch.set_num_threads(2)
        two = fused()
    finally:
        torch.set_num_threads(threads)
    for field in ("sigma_same", "sigma_diff"):
        assert np.array_equal(getattr(one, field), getattr(two, field))
        np.testing.assert_allclose(getattr(one, field), getattr(ref, field), rtol=1e-5,
                                   atol=1e-5 * np.abs(getattr(ref, field)).max())
    acc = CrossCameraScatter(pids, camids, 24)
    acc.add_maps(np.arange(3), maps[:3], proj, positions)
    with pytest.raises(ValueError, match="added twice"):
        acc.add_maps(np.arange(2, 4), maps[2:4], proj, positions)
    # float64 maps: float64 products (torch.mm), as project_maps
    wide = CrossCameraScatter(pids, camids, 24, camera_specific=True)
    wide.add_maps(np.arange(23), maps.astype(np.float64), proj, positions)
    exact = CrossCameraScatter(pids, camids, 24, camera_specific=True)
    exact.add(np.arange(23), project_maps(maps.astype(np.float64), proj, positions))
    np.testing.assert_allclose(wide.result().sigma_diff, exact.result().sigma_diff,
                               rtol=1e-10, atol=1e-12)
