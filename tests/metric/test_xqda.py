"""XQDA (cdpcf.md §4, §8.3 (3))."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import UsageError
from reidcli.metric.xqda import XQDA, quadratic_distances


def _data(seed=0, persons=20, dim=100, noise=0.6):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((persons, dim))
    bias = rng.standard_normal(dim)
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    x = centers[pids] + noise * rng.standard_normal((2 * persons, dim)) + camids[:, None] * bias
    return x, pids, camids


def _release_covariances(x, pids, camids):
    """The public release's C = 2 formula (cdpcf.md §4.2), unordered pairs."""
    g, z = x[camids == 0], x[camids == 1]
    yg, yz = pids[camids == 0], pids[camids == 1]
    classes = np.unique(pids)
    n_k = np.array([(yg == k).sum() for k in classes])
    m_k = np.array([(yz == k).sum() for k in classes])
    s_k = np.stack([g[yg == k].sum(0) for k in classes])
    t_k = np.stack([z[yz == k].sum(0) for k in classes])
    n_i = int((n_k * m_k).sum())
    m_of = dict(zip(classes, m_k))
    n_of = dict(zip(classes, n_k))
    ni_sigma = ((g * np.array([m_of[k] for k in yg])[:, None]).T @ g
                + (z * np.array([n_of[k] for k in yz])[:, None]).T @ z
                - s_k.T @ t_k - t_k.T @ s_k)
    n, m = len(g), len(z)
    s, t = g.sum(0), z.sum(0)
    ne_sigma = m * g.T @ g + n * z.T @ z - np.outer(s, t) - np.outer(t, s) - ni_sigma
    return ni_sigma / n_i, ne_sigma / (n * m - n_i)


def test_covariances_match_the_release_formula():
    from reidcli.pooling.weight_maps import cross_camera_pair_covariances
    x, pids, camids = _data(1, persons=12, dim=7)
    pids = pids.copy()
    pids[-2:] = 3                                            # multi-shot class
    cov = cross_camera_pair_covariances(x[:, None, :], pids, camids)
    sigma_i, sigma_e = _release_covariances(x, pids, camids)
    np.testing.assert_allclose(cov.sigma_same, sigma_i, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cov.sigma_diff, sigma_e, rtol=1e-10, atol=1e-12)


def test_span_reduction_equals_full_space():
    x, pids, camids = _data(0, persons=20, dim=100)         # d = 100 > N = 40
    reduced = XQDA().fit(x, pids, camids)
    q, g = x[camids == 0], x[camids == 1]
    d_reduced = reduced.distance(q, g)
    # full-space reference: the same algebra without the span basis
    from reidcli.pooling.weight_maps import cross_camera_pair_covariances
    cov = cross_camera_pair_covariances(x[:, None, :], pids, camids)
    sigma_i = cov.sigma_same + 0.001 * np.eye(100)
    u, values, _ = np.linalg.svd(np.linalg.solve(sigma_i, cov.sigma_diff))
    r = int((values > 1).sum())
    assert r == reduced.rank_
    v = u[:, :r]
    m = np.linalg.inv(v.T @ sigma_i @ v) - np.linalg.inv(v.T @ cov.sigma_diff @ v)
    d_full = quadratic_distances(q @ v, g @ v, 0.5 * (m + m.T))
    np.testing.assert_allclose(d_reduced, d_full, rtol=1e-8, atol=1e-8 * np.abs(d_full).max())
    assert reduced.rank_ == int((reduced.eigenvalues_ > 1).sum())


def test_distance_invariant_to_basis_change_and_solvers_close():
    x, pids, camids = _data(2, persons=40, dim=12)
    model = XQDA().fit(x, pids, camids)
    q, g = x[camids == 0], x[camids == 1]
    d = model.distance(q, g)
    a = np.random.default_rng(0).standard_normal((model.rank_, model.rank_))
    w2 = model.projection_ @ a
    m2 = np.linalg.inv(a) @ model.metric_ @ np.linalg.inv(a).T
    np.testing.assert_allclose(quadratic_distances(q @ w2, g @ w2, m2), d, rtol=1e-8,
                               atol=1e-8 * np.abs(d).max())
    other = XQDA(solver="eigh").fit(x, pids, camids)
    rank1 = (d.argmin(1) == np.arange(len(q))).mean()
    rank1_eigh = (other.distance(q, g).argmin(1) == np.arange(len(q))).mean()
    assert abs(rank1 - rank1_eigh) <= 0.1


def test_beats_euclidean_when_a_camera_bias_dominates():
    rng = np.random.default_rng(5)
    persons, dim = 150, 20
    centers = rng.standard_normal((persons, dim)) * np.r_[np.ones(5), 0.05 * np.ones(15)]
    noise = rng.standard_normal((2 * persons, dim)) * np.r_[0.3 * np.ones(5), 2 * np.ones(15)]
    pids = np.repeat(np.arange(persons), 2)
    camids = np.tile([0, 1], persons)
    x = centers[pids] + noise
    train, test = pids < 100, pids >= 100
    model = XQDA().fit(x[train], pids[train], camids[train])
    q, g = x[test & (camids == 0)], x[test & (camids == 1)]
    eucl = ((q[:, None] - g[None]) ** 2).sum(-1)
    r_x = (model.distance(q, g).argmin(1) == np.arange(len(q))).mean()
    r_e = (eucl.argmin(1) == np.arange(len(q))).mean()
    assert r_x > r_e + 0.2


def test_rank_fallback_cap_and_errors():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5))
    pids = np.repeat(np.arange(20), 2)
    camids = np.tile([0, 1], 20)
    with pytest.warns(UserWarning, match="no generalized eigenvalue exceeds 1"):
        # camera 1 shows −x of camera 0: same-person pairs vary more than different ones
        anti = np.repeat(x[::2], 2, axis=0) * np.where(camids == 0, 1.0, -1.0)[:, None]
        model = XQDA().fit(anti, pids, camids)
    assert model.rank_ == 1
    assert XQDA(max_dims=1).fit(x, pids, camids).rank_ == 1
    with pytest.raises(UsageError, match="--xqda-solver"):
        XQDA(solver="qr")
    with pytest.raises(UsageError, match="NaN"):
        XQDA().fit(np.full((4, 2), np.nan), pids[:4], camids[:4])


def test_train_xqda_cli_then_eval(capsys, tmp_path):
    import json

    from reidcli.pooling.synthetic_maps import write_toy_store
    from tests.cli.helpers import run_cli

    store = write_toy_store(tmp_path / "s.h5", persons=80, trials=2)
    code, _, err = run_cli(capsys, "train", "xqda", "--store", store, "--out", tmp_path / "m.h5")
    assert code == 0, err
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", tmp_path / "m.h5",
                           "--json", tmp_path / "r.json", "--quiet")
    assert code == 0, err
    xqda = json.loads((tmp_path / "r.json").read_text())
    assert xqda["num_trials"] == 2
    # the same numbers by hand for trial 1
    from reidcli.evaluation.arrays import evaluate_arrays
    from reidcli.metric.xqda import XQDAModel, fit_xqda_arrays
    from reidcli.store import open_store
    with open_store(store) as st:
        t = st.protocol.trials[1]
        rec = st.records
        x = st.features("pcb_g")
    pid, cam = rec["pid"].to_numpy(), rec["camid"].to_numpy()
    tr, q, g = np.sort(t["train_idx"]), t["query_idx"], t["gallery_idx"]
    arrays = fit_xqda_arrays(x[tr], pid[tr], cam[tr])
    model = XQDAModel(arrays["proj"], arrays["metric"], arrays["mean"], "center-l2")
    want = evaluate_arrays(pid[q], cam[q], pid[g], cam[g], distances=model.distance(x[q], x[g]))
    np.testing.assert_allclose(xqda["trials"][1]["cmc"][:10], want.cmc[:10], atol=1e-12)
    code, _, err = run_cli(capsys, "train", "xqda", "--store", store, "--out",
                           tmp_path / "n.h5", "--solver", "qr")
    assert code == 2 and "--solver" in err
