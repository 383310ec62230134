"""The weight-map and pooling paths convert stored maps block by block (bounded scratch):
the results must not depend on the block size, and must match direct float64 algebra."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.pooling import projection
from reidcli.pooling.cdpcf import learn_weight_maps, pooled_features
from reidcli.pooling.geometry import area_positions, position_areas
from reidcli.pooling.projection import image_blocks, project_maps, random_orthonormal_projection
from reidcli.pooling.weight_maps import CrossCameraScatter, camera_block_covariances


def _labels(persons: int, per_camera: int = 2, cameras: int = 2):
    pids = np.repeat(np.arange(persons), per_camera * cameras)
    camids = np.tile(np.repeat(np.arange(cameras), per_camera), persons)
    return pids, camids


def _maps(n: int, channels: int = 12, seed: int = 0, dtype=np.float16) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, channels, 8, 4)).astype(dtype)


def test_image_blocks_cover_every_image_once_within_the_budget():
    blocks = list(image_blocks(10, 3, budget=7))
    assert [b.stop - b.start for b in blocks] == [2, 2, 2, 2, 2]
    assert blocks[0].start == 0 and blocks[-1].stop == 10
    assert [b.stop - b.start for b in image_blocks(3, 100, budget=7)] == [1, 1, 1]


@pytest.mark.parametrize("grid", [(4, 1), (2, 2)])                 # stripes, and areas
def test_projection_equals_float64_algebra_for_any_block_size(monkeypatch, grid):
    maps = _maps(9)
    positions = area_positions(position_areas(8, 4, grid))
    proj = random_orthonormal_projection(len(positions) * 12, 5, 0, 0)
    flat = maps.astype(np.float64).reshape(9, 12, -1)
    expected = np.empty((9, 5, 32))
    for g, pos in enumerate(positions):
        expected[:, :, pos] = np.einsum("de,nds->nes", proj[g * 12:(g + 1) * 12],
                                        flat[:, :, pos])
    for budget in (1, 2 * 12 * 8 * 4, 1 << 20):                     # 1 image .. all images
        monkeypatch.setattr(projection, "BLOCK_BYTES", budget)
        q = project_maps(maps, proj, positions)
        assert q.dtype == np.float32 and q.shape == (9, 5, 32)
        np.testing.assert_allclose(q, expected, rtol=1e-5, atol=1e-5)


def test_float32_scatter_matches_float64_within_float32_rounding(monkeypatch):
    pids, camids = _labels(6)
    rng = np.random.default_rng(1)
    q64 = rng.standard_normal((len(pids), 3, 5))
    exact = camera_block_covariances(q64, pids, camids, camera_specific=True)
    monkeypatch.setattr(projection, "BLOCK_BYTES", 3 * 5 * 4 * 2)   # two images per block
    acc = CrossCameraScatter(pids, camids, 5, camera_specific=True)
    acc.add(np.arange(len(pids)), q64.astype(np.float32))
    got = acc.result()
    scale = np.abs(exact.sigma_same).max()
    assert np.abs(got.sigma_same - exact.sigma_same).max() < 1e-5 * scale
    assert np.abs(got.sigma_diff - exact.sigma_diff).max() < 1e-5 * np.abs(
        exact.sigma_diff).max()


def test_unbalanced_weighted_gram_is_blocked_like_the_one_shot(monkeypatch):
    pids = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    camids = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1])
    q = np.random.default_rng(2).standard_normal((len(pids), 2, 4))
    whole = camera_block_covariances(q, pids, camids, camera_specific=True)
    monkeypatch.setattr(projection, "BLOCK_BYTES", 1)                 # one image per block
    acc = CrossCameraScatter(pids, camids, 4, camera_specific=True)
    order = np.array([8, 2, 5, 0, 7, 3, 1, 6, 4])                      # unsorted groups
    acc.add(order, q[order])
    blocked = acc.result()
    np.testing.assert_allclose(blocked.sigma_same, whole.sigma_same, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocked.sigma_diff, whole.sigma_diff, rtol=1e-12, atol=1e-12)


def test_repeated_image_in_one_call_is_refused():
    pids, camids = _labels(2)
    acc = CrossCameraScatter(pids, camids, 4)
    with pytest.raises(ValueError, match="twice"):
        acc.add(np.array([0, 0]), np.zeros((2, 1, 4)))


@pytest.mark.parametrize("method", ["cdpcf", "dpcf"])
def test_learned_maps_and_pooled_features_do_not_depend_on_block_size(monkeypatch, method):
    pids, camids = _labels(5)
    maps = _maps(len(pids), seed=3)
    rows = np.arange(len(pids))
    read = lambda _layer, r: maps[r]                                  # noqa: E731
    specific = method == "cdpcf"
    runs = []
    for budget in (1, 1 << 20):
        monkeypatch.setattr(projection, "BLOCK_BYTES", budget)
        learned = learn_weight_maps(read, "conv4_x", 2, rows, pids, camids, K=2, E=6,
                                    grid=(4, 1), seed=0, camera_specific=specific, chunk=7)
        x = pooled_features(read, "conv4_x", rows, camids, learned["weight_maps"],
                            grid=(4, 1), camera_specific=specific, chunk=7)
        runs.append((learned, x))
    (a, xa), (b, xb) = runs
    np.testing.assert_allclose(a["weight_maps"], b["weight_maps"], atol=1e-5)
    np.testing.assert_allclose(a["eigenvalues"], b["eigenvalues"], rtol=1e-5)
    np.testing.assert_allclose(xa, xb, rtol=1e-5, atol=1e-5)


def test_without_projection_reads_stored_float16_maps_as_float64(monkeypatch):
    """w/o R (E = 0) takes the stored maps as they are; blocks convert them to float64."""
    pids, camids = _labels(4)
    maps = _maps(len(pids), seed=4)
    rows = np.arange(len(pids))
    config = dict(K=2, E=0, grid=(4, 1), seed=0, camera_specific=True, chunk=5)
    monkeypatch.setattr(projection, "BLOCK_BYTES", 1)
    stored = learn_weight_maps(lambda _l, r: maps[r], "conv4_x", 2, rows, pids, camids, **config)
    wide = maps.astype(np.float64)
    exact = learn_weight_maps(lambda _l, r: wide[r], "conv4_x", 2, rows, pids, camids, **config)
    np.testing.assert_allclose(stored["weight_maps"], exact["weight_maps"], atol=1e-10)
    np.testing.assert_allclose(stored["eigenvalues"], exact["eigenvalues"], rtol=1e-10)
