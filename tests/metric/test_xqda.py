"""XQDA (docs/methods/cdpcf.md invariant 3) and its fitted-model integration."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import FittedModelError, UsageError
from reidcli.metric.pair_covariances import cross_camera_pair_covariances
from reidcli.metric.xqda import (XQDA, XQDAModel, fit_xqda_arrays, preprocess,
                                 quadratic_distances, xqda_arrays)


def _data(seed=0, persons=20, dim=100, noise=0.6):
    """Two cameras, one image per camera per person, a camera bias."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((persons, dim))
    bias = rng.standard_normal(dim)
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    x = centers[pids] + noise * rng.standard_normal((2 * persons, dim)) + camids[:, None] * bias
    return x, pids, camids


def _toy(seed=5, persons=150, dim=20):
    """5 informative dimensions with small noise, 15 pure-noise dimensions."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((persons, dim)) * np.r_[np.ones(5), 0.05 * np.ones(dim - 5)]
    noise = rng.standard_normal((2 * persons, dim)) * np.r_[0.3 * np.ones(5), 2 * np.ones(dim - 5)]
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    return centers[pids] + noise, pids, camids


def _brute_vector_covariances(x, pids, camids):
    """Σ_I, Σ_E by enumerating ordered cross-camera pairs of rows."""
    i, j = np.nonzero(camids[:, None] != camids[None, :])
    same = pids[i] == pids[j]
    d = x[i] - x[j]
    return d[same].T @ d[same] / same.sum(), d[~same].T @ d[~same] / (~same).sum()


def _release_covariances(x, pids, camids):
    """The public release's C = 2 formula (docs/methods/cdpcf.md), unordered pairs, class sums."""
    g, z = x[camids == 0], x[camids == 1]
    yg, yz = pids[camids == 0], pids[camids == 1]
    classes = np.unique(pids)
    n_k = np.array([(yg == k).sum() for k in classes])
    m_k = np.array([(yz == k).sum() for k in classes])
    s_k = np.stack([g[yg == k].sum(0) for k in classes])
    t_k = np.stack([z[yz == k].sum(0) for k in classes])
    n_i = int((n_k * m_k).sum())
    m_of, n_of = dict(zip(classes, m_k)), dict(zip(classes, n_k))
    ni_sigma = ((g * np.array([m_of[k] for k in yg])[:, None]).T @ g
                + (z * np.array([n_of[k] for k in yz])[:, None]).T @ z
                - s_k.T @ t_k - t_k.T @ s_k)
    n, m = len(g), len(z)
    s, t = g.sum(0), z.sum(0)
    ne_sigma = m * g.T @ g + n * z.T @ z - np.outer(s, t) - np.outer(t, s) - ni_sigma
    return ni_sigma / n_i, ne_sigma / (n * m - n_i)


def _rank1(d):
    return float((d.argmin(1) == np.arange(len(d))).mean())


def test_vector_covariances_equal_brute_force_and_release_formula():
    x, pids, camids = _data(1, persons=12, dim=7)
    pids = pids.copy()
    pids[-2:] = 3                                              # uneven multi-shot class
    x = np.vstack([x, x[:3] + 0.1])                            # extra camera-0/1 images
    pids, camids = np.r_[pids, pids[:3]], np.r_[camids, camids[:3]]
    cov = cross_camera_pair_covariances(x[:, None, :], pids, camids)
    brute_i, brute_e = _brute_vector_covariances(x, pids, camids)
    release_i, release_e = _release_covariances(x, pids, camids)
    for got, want in ((cov.sigma_same, brute_i), (cov.sigma_diff, brute_e),
                      (cov.sigma_same, release_i), (cov.sigma_diff, release_e)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())


def _full_space_xqda(x, pids, camids, lam=0.001):
    """Reference: XQDA in the full d-dimensional space, brute-force covariances."""
    sigma_i, sigma_e = _brute_vector_covariances(x, pids, camids)
    sigma_i = sigma_i + lam * np.eye(x.shape[1])
    u, values, _ = np.linalg.svd(np.linalg.solve(sigma_i, sigma_e))
    r = max(1, int((values > 1).sum()))
    v = u[:, :r]
    m = np.linalg.inv(v.T @ sigma_i @ v) - np.linalg.inv(v.T @ sigma_e @ v)
    return v, 0.5 * (m + m.T), r


def test_span_reduction_equals_full_space():
    x, pids, camids = _data(0, persons=20, dim=100)            # d = 100 > N = 40
    model = XQDA(normalize="none").fit(x, pids, camids)
    assert model.projection_.shape == (100, model.rank_)
    assert model.eigenvalues_.shape[0] < 100                  # it worked in the span
    assert model.rank_ == int((model.eigenvalues_ > 1).sum())
    v, m, r = _full_space_xqda(x, pids, camids)
    assert r == model.rank_
    q, g = x[camids == 0], x[camids == 1]
    want = quadratic_distances(q @ v, g @ v, m)
    got = model.distance(q, g)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
    # the same with the paper's solver: the generalized eigenvalues > 1 define r
    e = XQDA(normalize="none", solver="eigh").fit(x, pids, camids)
    assert e.rank_ == int((e.eigenvalues_ > 1).sum())


def test_distance_is_invariant_to_the_basis_of_the_subspace():
    x, pids, camids = _toy(2, persons=60)
    model = XQDA(normalize="none").fit(x, pids, camids)
    q, g = x[camids == 0], x[camids == 1]
    d = model.distance(q, g)
    assert d.shape == (60, 60)
    sigma_i, sigma_e = _brute_vector_covariances(x, pids, camids)
    sigma_i = sigma_i + 0.001 * np.eye(x.shape[1])
    rng = np.random.default_rng(0)
    r = model.rank_
    signs_scales = np.diag(rng.choice([-1.0, 1.0], r) * rng.uniform(0.2, 5.0, r))
    for a in (signs_scales, rng.standard_normal((r, r))):     # W → W·A
        w = model.projection_ @ a
        m = np.linalg.inv(w.T @ sigma_i @ w) - np.linalg.inv(w.T @ sigma_e @ w)
        np.testing.assert_allclose(quadratic_distances(q @ w, g @ w, m), d, rtol=1e-8,
                                   atol=1e-8 * np.abs(d).max())
    # flipping the sign of every feature changes nothing either
    flipped = XQDA(normalize="none").fit(-x, pids, camids)
    np.testing.assert_allclose(flipped.distance(-q, -g), d, rtol=1e-8,
                               atol=1e-8 * np.abs(d).max())
    # pairwise_terms are the two factors of the one-GEMM distance
    u = model.transform(q)
    um, a_q = model.pairwise_terms(u)
    np.testing.assert_allclose(a_q, np.diag(model.distance(q, 0 * q)), rtol=1e-10)
    np.testing.assert_allclose(um, u @ model.metric_)


def test_svd_and_eigh_solvers_are_close_but_not_identical():
    x, pids, camids = _toy(3)
    train = pids < 100
    svd = XQDA(normalize="none", max_dims=8).fit(x[train], pids[train], camids[train])
    eigh = XQDA(normalize="none", solver="eigh", max_dims=8).fit(x[train], pids[train],
                                                                  camids[train])
    q, g = x[~train & (camids == 0)], x[~train & (camids == 1)]
    d_svd, d_eigh = svd.distance(q, g), eigh.distance(q, g)
    rel = np.linalg.norm(d_svd - d_eigh) / np.linalg.norm(d_svd)
    assert 1e-6 < rel < 0.15
    assert abs(_rank1(d_svd) - _rank1(d_eigh)) <= 0.1
    # eigh: V^T Σ_I′ V = I and V^T Σ_E V = diag(λ), so M = I − diag(1/λ)
    np.testing.assert_allclose(eigh.metric_, np.diag(1 - 1 / eigh.eigenvalues_[:8]),
                               atol=1e-8)
    assert np.all(np.diff(svd.eigenvalues_) <= 0) and np.all(np.diff(eigh.eigenvalues_) <= 0)


def test_beats_euclidean_on_a_discriminative_toy_problem():
    x, pids, camids = _toy(5)
    train, test = pids < 100, pids >= 100
    model = XQDA(normalize="none").fit(x[train], pids[train], camids[train])
    q, g = x[test & (camids == 0)], x[test & (camids == 1)]
    eucl = ((q[:, None] - g[None]) ** 2).sum(-1)
    assert _rank1(model.distance(q, g)) > _rank1(eucl) + 0.2


def test_rank_fallback_warns_and_max_dims_caps():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5))
    pids = np.repeat(np.arange(20), 2)
    camids = np.tile([0, 1], 20)
    # camera 1 shows −x of camera 0: same-person pairs vary more than different ones
    anti = np.repeat(x[::2], 2, axis=0) * np.where(camids == 0, 1.0, -1.0)[:, None]
    for solver in ("svd", "eigh"):
        with pytest.warns(UserWarning, match="exceeds 1.*not discriminative"):
            model = XQDA(normalize="none", solver=solver).fit(anti, pids, camids)
        assert model.rank_ == 1 and model.projection_.shape == (5, 1)
    good = XQDA(normalize="none").fit(*_toy(1, persons=60))
    assert good.rank_ > 2
    capped = XQDA(normalize="none", max_dims=2).fit(*_toy(1, persons=60))
    assert capped.rank_ == 2 and capped.metric_.shape == (2, 2)


def test_input_errors_name_the_problem():
    x, pids, camids = _data(0, persons=5, dim=4)
    with pytest.raises(UsageError, match="solver='qr'"):
        XQDA(solver="qr").fit(x, pids, camids)
    with pytest.raises(UsageError, match="lam=-1"):
        XQDA(lam=-1).fit(x, pids, camids)
    with pytest.raises(UsageError, match="max_dims=0"):
        XQDA(normalize="none", max_dims=0).fit(x, pids, camids)
    with pytest.raises(UsageError, match="NaN"):
        XQDA(normalize="none").fit(np.where(np.arange(4) == 1, np.nan, x), pids, camids)
    with pytest.raises(UsageError, match=r"shape \[N ≥ 2, d ≥ 1\], got \(10,\)"):
        XQDA(normalize="none").fit(x[:, 0], pids, camids)
    with pytest.raises(UsageError, match="10 feature rows but pids of shape"):
        XQDA(normalize="none").fit(x, pids[:-1], camids)
    with pytest.raises(UsageError, match="1 camera"):
        XQDA(normalize="none").fit(x, pids, np.zeros_like(camids))
    with pytest.raises(UsageError, match="no same-person cross-camera pairs"):
        XQDA(normalize="none").fit(x, np.arange(10), camids)
    with pytest.raises(UsageError, match="no different-person cross-camera pairs"):
        XQDA(normalize="none").fit(x, np.zeros(10, int), camids)
    with pytest.raises(UsageError, match="not fitted"):
        XQDA(normalize="none").transform(x)
    with pytest.raises(UsageError, match=r"expected features \[n, 4\]"):
        XQDA(normalize="none").fit(x, pids, camids).distance(x[:, :3], x)


def test_fitted_round_trip(tmp_path):
    from reidcli import fitted

    x, pids, camids = _toy(7, persons=80)
    x = x + 3.0                                               # an offset for the centring
    train = pids < 50
    q, g = x[~train & (camids == 0)], x[~train & (camids == 1)]
    arrays = fit_xqda_arrays(x[train], pids[train], camids[train])
    assert arrays["proj"].dtype == np.float32 and arrays["metric"].dtype == np.float64
    np.testing.assert_allclose(arrays["mean"], x[train].mean(0))
    # by hand: centre with the train mean, L2-normalise, XQDA
    mean = x[train].mean(0)
    model = XQDA(normalize="none").fit(preprocess(x[train], "center-l2", mean), pids[train],
                                       camids[train])
    want = model.distance(preprocess(q, "center-l2", mean), preprocess(g, "center-l2", mean))
    path = fitted.save(tmp_path / "m.h5", "xqda", [arrays, xqda_arrays(model, mean)],
                       hyperparameters={"normalize": "center-l2"}, feature="f")
    loaded = fitted.load(path)
    assert loaded.method == "xqda" and loaded.num_trials == 2
    for k in (0, 1):
        m = loaded.for_trial(k)
        assert m.metric == "xqda" and m.input_dim == x.shape[1]
        got = m.distance(q.astype(np.float32), g.astype(np.float32))
        assert got.dtype == np.float64 and got.shape == (len(q), len(g))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        assert _rank1(got) == _rank1(want)
    # alternatives: plain L2 (no mean stored) and no preprocessing; bool flag
    l2 = fit_xqda_arrays(x[train], pids[train], camids[train], normalize="l2")
    assert "mean" not in l2
    raw = fit_xqda_arrays(x[train], pids[train], camids[train], normalize="none")
    d_raw = XQDAModel(raw["proj"], raw["metric"], normalize=False).distance(q, g)
    direct = XQDA(normalize="none").fit(x[train], pids[train], camids[train]).distance(q, g)
    np.testing.assert_allclose(d_raw, direct, rtol=1e-4, atol=1e-4 * np.abs(direct).max())
    d_l2 = XQDAModel(l2["proj"], l2["metric"], normalize="l2").distance(q, g)
    assert np.allclose(d_l2, XQDAModel(l2["proj"], l2["metric"], normalize=True).distance(q, g))
    # a file without a normalize record: centre + L2 exactly when a mean is stored
    fitted.save(tmp_path / "n.h5", "xqda", raw)
    np.testing.assert_allclose(fitted.load(tmp_path / "n.h5").for_trial(0).distance(q, g),
                               d_raw)
    with pytest.raises(FittedModelError, match="xqda expects 20-dimensional"):
        loaded.for_trial(0).distance(q[:, :5], g)
    with pytest.raises(FittedModelError, match="no stored mean"):
        XQDAModel(raw["proj"], raw["metric"], normalize="center-l2")
    with pytest.raises(UsageError, match="normalize='zscore'"):
        fit_xqda_arrays(x[train], pids[train], camids[train], normalize="zscore")


def test_train_xqda_cli_then_eval(capsys, tmp_path):
    import json

    from reidcli.evaluation.arrays import evaluate_arrays
    from reidcli.synthetic.conv_maps import write_toy_store
    from reidcli.store import open_store
    from tests.cli.helpers import run_cli

    store = write_toy_store(tmp_path / "s.h5", persons=80, trials=2)
    code, _, err = run_cli(capsys, "train", "xqda", "--store", store, "--out", tmp_path / "m.h5")
    assert code == 0, err
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", tmp_path / "m.h5",
                           "--json", tmp_path / "r.json", "--quiet")
    assert code == 0, err
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["num_trials"] == 2
    # the same numbers by hand for trial 1
    with open_store(store) as st:
        t = st.protocol.trials[1]
        rec = st.records
        x = st.features("pcb_g")
    pid, cam = rec["pid"].to_numpy(), rec["camid"].to_numpy()
    tr, q, g = np.sort(t["train_idx"]), t["query_idx"], t["gallery_idx"]
    arrays = fit_xqda_arrays(x[tr], pid[tr], cam[tr])
    model = XQDAModel(arrays["proj"], arrays["metric"], arrays["mean"], "center-l2")
    want = evaluate_arrays(pid[q], cam[q], pid[g], cam[g], distances=model.distance(x[q], x[g]))
    np.testing.assert_allclose(result["trials"][1]["cmc"][:10], want.cmc[:10], atol=1e-12)
    code, _, err = run_cli(capsys, "train", "xqda", "--store", store, "--out",
                           tmp_path / "n.h5", "--solver", "qr")
    assert code == 2 and "--solver" in err


@pytest.mark.parametrize("solver", ["svd", "eigh"])
def test_torch_device_path_matches_numpy(solver):
    pytest.importorskip("torch")
    x, pids, camids = _data(3, persons=20, dim=60)            # span reduction too
    q, g = x[camids == 0], x[camids == 1]
    want = XQDA(normalize="none", solver=solver).fit(x, pids, camids)
    got = XQDA(normalize="none", solver=solver, device="cpu").fit(x, pids, camids)
    assert got.rank_ == want.rank_
    np.testing.assert_allclose(got.eigenvalues_, want.eigenvalues_, rtol=1e-8, atol=1e-10)
    d = want.distance(q, g)
    np.testing.assert_allclose(got.distance(q, g), d, rtol=1e-7, atol=1e-7 * np.abs(d).max())
