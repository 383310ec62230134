"""C-DPCF / DPCF / AvgP fitting and distances (docs/methods/cdpcf.md)."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import UsageError
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.pooling.cdpcf import CDPCF, DPCF, AvgP, AvgPPad
from reidcli.pooling.geometry import area_positions, parse_grid, position_areas, same_area_mask
from reidcli.pooling.projection import project_maps, random_orthonormal_projection
from reidcli.pooling.pooled import flat_maps
from reidcli.synthetic.conv_maps import PART_ROWS, WIDTH, toy_problem
from reidcli.pooling.weight_maps import CrossCameraScatter


METHODS = {"cdpcf": CDPCF, "dpcf": DPCF, "avgp": AvgP, "avgp-pad": AvgPPad}


def _fit(train, estimator):
    rows = np.arange(len(train.pids))
    arrays = {"toy": estimator.fit_layer(train.read, "toy", 0, rows, train.pids,
                                         train.camids)}
    return type(estimator).model_from_arrays(
        arrays, estimator.hyperparameters(["toy"], np.array([0, 1])))


def _distances(model, test):
    q = np.flatnonzero(test.camids == 0)
    g = np.flatnonzero(test.camids == 1)
    d = model.distance(model.embed(test.read, q, test.camids[q]),
                       model.embed(test.read, g, test.camids[g]))
    return d, q, g


def _rank1(model, test):
    d, q, g = _distances(model, test)
    result = evaluate_arrays(test.pids[q], test.camids[q], test.pids[g], test.camids[g],
                             distances=d)
    return 100 * result.cmc[0]


def _config(method, seed=0, **kw):
    return METHODS[method](K=2, E=16, G=3, seed=seed, **kw)


def test_projection_is_orthonormal_seeded_and_per_layer():
    r = random_orthonormal_projection(96, 16, seed=0, layer=2)
    np.testing.assert_allclose(r.T @ r, np.eye(16), atol=1e-12)
    np.testing.assert_array_equal(r, random_orthonormal_projection(96, 16, seed=0, layer=2))
    assert not np.allclose(r, random_orthonormal_projection(96, 16, seed=0, layer=3))
    assert not np.allclose(r, random_orthonormal_projection(96, 16, seed=1, layer=2))


def test_grid_areas():
    assert parse_grid(None, 6) == (6, 1) and parse_grid("2x2") == (2, 2)
    areas = position_areas(24, 8, (6, 1))
    assert areas.shape == (192,) and areas[:32].tolist() == [0] * 32 and areas[-1] == 5
    assert [len(a) for a in area_positions(areas)] == [32] * 6
    assert position_areas(4, 2, (2, 2)).tolist() == [0, 1, 0, 1, 2, 3, 2, 3]
    with pytest.raises(UsageError, match="grid"):
        parse_grid("6by1")


def test_without_projection_masked_gram_equals_identity_projection():
    """"w/o R" (E = 0) masked Grams = the explicit computation with R = I_D (§8.3 (6))."""
    train, _ = toy_problem(0, train_persons=12, test_persons=2)
    maps = flat_maps(train.maps)
    areas = position_areas(12, WIDTH, (3, 1))
    positions = area_positions(areas)
    explicit = CrossCameraScatter(train.pids, train.camids, 48, camera_specific=True)
    explicit.add(np.arange(len(maps)), project_maps(maps, np.eye(3 * 16), positions))
    masked = CrossCameraScatter(train.pids, train.camids, 48, camera_specific=True,
                                mask=same_area_mask(areas))
    masked.add(np.arange(len(maps)), project_maps(maps, None, positions))
    a, b = explicit.result(), masked.result()
    np.testing.assert_allclose(b.sigma_same, a.sigma_same, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(b.sigma_diff, a.sigma_diff, rtol=1e-10, atol=1e-10)


def test_distances_invariant_to_map_sign_and_feature_scale():
    train, test = toy_problem(4, train_persons=60, test_persons=20)
    model = _fit(train, _config("cdpcf"))
    d, _, _ = _distances(model, test)
    # flipping w_k negates x_k and its training mean, hence u_k: δ² is unchanged
    layer = dict(model.arrays["toy"])
    layer["weight_maps"] = layer["weight_maps"] * np.array([-1.0, 1.0])
    layer["map_0"] = {**layer["map_0"], "mean": -layer["map_0"]["mean"]}
    other = CDPCF.model_from_arrays({"toy": layer}, model.hp)
    np.testing.assert_allclose(_distances(other, test)[0], d, rtol=1e-8, atol=1e-8)
    scaled_train, scaled_test = (type(t)(t.maps * 3.7, t.pids, t.camids) for t in (train, test))
    model_scaled = _fit(scaled_train, _config("cdpcf"))
    np.testing.assert_allclose(_distances(model_scaled, scaled_test)[0], d, rtol=1e-6,
                               atol=1e-6)


def test_method_ordering_on_camera_biased_maps():
    """§8.2: C-DPCF > DPCF > AvgP+XQDA per seed, with the spec's margins."""
    scores = {m: [] for m in ("cdpcf", "dpcf", "avgp")}
    for seed in (0, 1, 2):
        train, test = toy_problem(seed)
        for method in scores:
            scores[method].append(_rank1(_fit(train, _config(method, seed)), test))
    c, d, a = (np.array(scores[m]) for m in ("cdpcf", "dpcf", "avgp"))
    assert np.all(c > d) and np.all(d > a)
    assert c.mean() - d.mean() >= 15 and d.mean() - a.mean() >= 5 and c.mean() >= 50


def test_control_without_camera_bias_makes_cdpcf_and_dpcf_equal():
    c, d = [], []
    for seed in (0, 1, 2):
        train, test = toy_problem(seed, biased=False)
        c.append(_rank1(_fit(train, _config("cdpcf", seed)), test))
        d.append(_rank1(_fit(train, _config("dpcf", seed)), test))
    assert abs(np.mean(c) - np.mean(d)) <= 8


def test_learned_maps_sit_on_each_cameras_discriminative_rows():
    train, _ = toy_problem(0)
    model = _fit(train, _config("cdpcf"))
    w = model.arrays["toy"]["weight_maps"]                     # [2·48, 2]
    for cam, rows in PART_ROWS.items():
        block = w[cam * 48:(cam + 1) * 48].reshape(12, WIDTH, 2)
        on_rows = (block[list(rows)] ** 2).sum()
        assert on_rows >= 0.95 * (block ** 2).sum()


def test_avgp_pad_and_cosine_variants_and_unseen_camera():
    train, test = toy_problem(0, train_persons=40, test_persons=10)
    pad = _fit(train, _config("avgp-pad"))
    assert pad.arrays["toy"]["map_0"]["proj"].shape[0] == 2 * 3 * 16   # C·G·D'
    cosine = _fit(train, _config("avgp", metric="none"))
    d, q, g = _distances(cosine, test)
    x = test.maps.reshape(len(test.pids), 16, 3, 4, WIDTH).mean(axis=(3, 4))
    x = x.reshape(len(test.pids), -1)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(d, 1 - x[q] @ x[g].T, rtol=1e-5, atol=1e-6)
    with pytest.raises(UsageError, match="camera 5 was not seen in training"):
        pad.embed(test.read, np.array([0]), np.array([5]))


def test_config_validation():
    with pytest.raises(UsageError, match="has no parameter 'method'"):
        CDPCF(method="maxp")
    with pytest.raises(UsageError, match="metric='l1'"):
        CDPCF(metric="l1").settings()
    train, _ = toy_problem(0, train_persons=10, test_persons=2)
    with pytest.raises(UsageError, match="E=64 exceeds"):
        _fit(train, DPCF(K=2, E=64, G=3))
