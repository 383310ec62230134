"""T10: camera statistics (docs/methods/dart3.md) and camera normalisation."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.adapt import AdaptConfig, adapt_features, inputs_from_arrays
from reidcli.adapt.statistics import camera_statistics, normalize_by_camera
from reidcli.synthetic.camera_bias import synthetic_bias


def test_pooled_statistics_are_numpy_mean_and_population_std_of_query_and_gallery_rows():
    e = synthetic_bias(1)
    stats = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4)
    for c in range(4):
        rows = np.concatenate([e.query[e.query_cam == c], e.gallery[e.gallery_cam == c]])
        np.testing.assert_allclose(stats.mean_q[c], rows.mean(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(stats.std_q[c], rows.std(0, ddof=0), rtol=1e-5)
        np.testing.assert_array_equal(stats.mean_q[c], stats.mean_g[c])   # same values
        np.testing.assert_array_equal(stats.std_q[c], stats.std_g[c])
        assert stats.rows_used[c] == len(rows)


def test_separate_statistics_use_each_side_and_borrow_a_missing_side():
    e = synthetic_bias(2)
    q_cam = np.where(e.query_cam == 3, 2, e.query_cam)         # camera 3: gallery only
    stats = camera_statistics(e.query, q_cam, e.gallery, e.gallery_cam, 4, mode="separate")
    for c in range(3):
        np.testing.assert_allclose(stats.mean_q[c], e.query[q_cam == c].mean(0), atol=1e-5)
        np.testing.assert_allclose(stats.std_g[c], e.gallery[e.gallery_cam == c].std(0),
                                   rtol=1e-5)
    np.testing.assert_array_equal(stats.mean_q[3], stats.mean_g[3])
    np.testing.assert_allclose(stats.mean_g[3], e.gallery[e.gallery_cam == 3].mean(0),
                               atol=1e-5)


def test_ddof_one_is_the_unbiased_std():
    e = synthetic_bias(0)
    s0 = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4, ddof=0)
    s1 = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4, ddof=1)
    n = s0.rows_used[:, None]
    np.testing.assert_allclose(s1.std_q, s0.std_q * np.sqrt(n / (n - 1)), rtol=1e-5)


def test_one_row_camera_gets_eps_scale_and_a_zero_normalised_row():
    e = synthetic_bias(0)
    q_cam = e.query_cam.copy()
    q_cam[5] = 7                                                  # a camera with one row
    inputs = inputs_from_arrays(e.query, q_cam, e.gallery, e.gallery_cam)
    out = adapt_features(inputs, AdaptConfig("norm"))
    code = int(np.flatnonzero(inputs.cameras.cam_ids == 7)[0])
    assert np.all(out.stats.std_q[code] == np.float32(1e-6))
    np.testing.assert_array_equal(out.queries[5], np.zeros(e.query.shape[1], np.float32))
    np.testing.assert_array_equal(out.stats.mean_q[code], e.query[5])


def test_max_per_camera_subsamples_with_the_seed():
    e = synthetic_bias(0)
    a = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4,
                          max_per_camera=10, seed=3)
    b = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4,
                          max_per_camera=10, seed=3)
    c = camera_statistics(e.query, e.query_cam, e.gallery, e.gallery_cam, 4,
                          max_per_camera=10, seed=4)
    assert (a.rows_used == 10).all()
    np.testing.assert_array_equal(a.mean_q, b.mean_q)
    assert not np.array_equal(a.mean_q, c.mean_q)


def test_normalize_by_camera_is_the_z_score():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, 5)).astype(np.float32)          # > one row chunk
    codes = rng.integers(0, 3, len(x))
    mean, std = rng.normal(size=(3, 5)).astype(np.float32), rng.uniform(1, 2, (3, 5)).astype(
        np.float32)
    np.testing.assert_allclose(normalize_by_camera(x, codes, mean, std),
                               (x - mean[codes]) / std[codes], rtol=1e-6)


@pytest.mark.parametrize("bad", [dict(stats="median"), dict(std_ddof=2), dict(eps=0.0)])
def test_bad_statistics_options_are_usage_errors(bad):
    from reidcli.errors import UsageError

    with pytest.raises(UsageError):
        AdaptConfig("norm", **bad).resolved()
