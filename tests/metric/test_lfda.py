"""LFDA / kernel LFDA (docs/methods/warca.md [8] settings) and the shared kernels of
reidcli.metric.kernels."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli import fitted
from reidcli.errors import FittedModelError, ParameterError, UsageError
from reidcli.metric import kernels
from reidcli.metric.lfda import (LFDA, KernelLFDA, lfda_scatters, local_scales, regularise,
                                 top_generalized_eigenvectors)
from tests.metric.helpers import camera_offset_toy as _toy
from tests.metric.helpers import rank1_of_embeddings as _rank1


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The toy problems are tiny: torch's intra-op threads only add synchronisation, which
    made these tests erratically 10–50× slower on a busy 2-core machine."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _xiong_scatters(K, pids, knn, beta):
    """Dense transcription of the [8] kernel-LFDA formulas (docs/methods/warca.md), for checking."""
    n = len(K)
    d2 = np.diag(K)[:, None] + np.diag(K)[None, :] - 2 * K
    sigma = np.sqrt(np.sort(d2, axis=0)[knn])                     # (knn+1)-th incl. self
    aff = np.exp(-d2 / np.outer(sigma, sigma))
    np.fill_diagonal(aff, 0)
    same = pids[:, None] == pids[None, :]
    nc = same.sum(0)
    aw = np.where(same, aff / nc[None, :], 0.0)
    ab = np.where(same, aff * (1.0 / n - 1.0 / nc[None, :]), 1.0 / n)
    ew, eb = np.diag(aw.sum(0)) - aw, np.diag(ab.sum(0)) - ab
    sw, sb = K @ ew @ K, K @ eb @ K
    return sb, (1 - beta) * sw + beta * np.trace(sw) / n * np.eye(n)


# -- learning ----------------------------------------------------------------------------------
def test_lfda_beats_euclidean():
    """Measured over seeds 0–2: Euclid 0.00–0.03, LFDA 0.59–0.63 (dual 0.62–0.64)."""
    xtr, ptr, q, g = _toy()
    model = LFDA(dim=6).fit(xtr, ptr)
    assert model.solver_ == "primal" and model.projection_.shape == (60, 6)
    euclid, lfda = _rank1(q, g), _rank1(model.transform(q), model.transform(g))
    assert lfda >= 0.45 and lfda >= euclid + 0.3, (euclid, lfda)


def test_kernel_lfda_rbf_beats_euclidean():
    """Measured over seeds 0–2: Euclid 0.00–0.03, kLFDA-RBF 0.49–0.54 (0.31–0.40 with 100
    training ids)."""
    xtr, ptr, q, g = _toy()
    model = KernelLFDA(dim=6, kernel="rbf").fit(xtr, ptr)
    assert model.A_.shape == (6, 600) and model.kernel_.name == "rbf"
    euclid, klfda = _rank1(q, g), _rank1(model.transform(q), model.transform(g))
    assert klfda >= 0.35 and klfda >= euclid + 0.25, (euclid, klfda)


# -- equations -------------------------------------------------------------------------------
def test_scatters_match_the_dense_formulas_and_solve_the_eigenproblem():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((36, 5))
    pids = np.repeat(np.arange(9), 4)
    K = kernels.Kernel("rbf", 0.2).matrix(x)
    sigma = local_scales(lambda rows: np.diag(K)[rows][:, None] + np.diag(K)[None, :]
                         - 2 * K[rows], len(K), 6)
    s_b, s_w = lfda_scatters(K, pids, lambda r: np.diag(K)[r][:, None] + np.diag(K)[r][None, :]
                             - 2 * K[np.ix_(r, r)], sigma)
    s_w = regularise(s_w, 0.01)
    ref_b, ref_w = _xiong_scatters(K, pids, 6, 0.01)
    np.testing.assert_allclose(s_b, ref_b, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(s_w, ref_w, rtol=1e-9, atol=1e-11)
    values, v = top_generalized_eigenvectors(s_b, s_w, 4)
    # S_b v = λ S_w v, vᵀ S_w v = I, the top-4 generalized eigenvalues in descending order
    np.testing.assert_allclose(s_b @ v, (s_w @ v) * values[None, :], atol=1e-9 * abs(values).max())
    np.testing.assert_allclose(v.T @ s_w @ v, np.eye(4), atol=1e-9)
    import scipy.linalg
    all_values = scipy.linalg.eigh(ref_b, ref_w, eigvals_only=True)
    np.testing.assert_allclose(values, all_values[::-1][:4], rtol=1e-8)
    # the estimator's A solves the same problem
    model = KernelLFDA(dim=4, kernel="rbf", gamma=0.2).fit(x, pids)
    np.testing.assert_allclose(np.abs(model.A_), np.abs(v.T), rtol=1e-6, atol=1e-9)


def test_linear_kernel_lfda_equals_the_dual_lfda_and_collapses_to_w():
    xtr, ptr, q, _ = _toy(train_ids=12)                            # N = 48 < D = 60 → dual
    lfda = LFDA(dim=5).fit(xtr, ptr)
    assert lfda.solver_ == "dual"
    arrays = KernelLFDA(dim=5, kernel="linear").fit(xtr, ptr, None).fitted_arrays()
    assert set(arrays) == {"W", "eigenvalues"}
    np.testing.assert_allclose(arrays["W"], lfda.projection_, rtol=1e-7, atol=1e-9)
    z = KernelLFDA(dim=5, kernel="linear").fit(xtr, ptr).transform(q)
    np.testing.assert_allclose(z, q @ arrays["W"], rtol=1e-7, atol=1e-9)


def test_translation_invariance_and_shapes():
    xtr, ptr, q, _ = _toy(train_ids=30)
    w = LFDA(dim=4).fit(xtr, ptr).projection_
    np.testing.assert_allclose(LFDA(dim=4).fit(xtr + 5.0, ptr).projection_, w, rtol=1e-6,
                               atol=1e-9)
    a = KernelLFDA(dim=4, kernel="rbf").fit(xtr, ptr)
    b = KernelLFDA(dim=4, kernel="rbf").fit(xtr - 2.0, ptr)
    np.testing.assert_allclose(b.A_, a.A_, rtol=1e-6, atol=1e-9)
    assert a.transform(q[:3]).shape == (3, 4)
    assert LFDA(dim=60).fit(xtr, ptr).projection_.shape == (60, 60)       # D itself
    with pytest.raises(ParameterError, match=r"dim=500 is above the dimension of the input "
                                             r"features \(60\)"):
        LFDA(dim=500).fit(xtr, ptr)                                        # never capped silently


# -- kernels ---------------------------------------------------------------------------------
def test_chi2_kernels_match_the_definitions():
    rng = np.random.default_rng(7)
    x = rng.random((5, 8)) * (rng.random((5, 8)) > 0.3)               # zeros in both rows too
    y = rng.random((4, 8)) * (rng.random((4, 8)) > 0.3)
    x[0, :3] = y[0, :3] = 0.0
    num, den = (x[:, None] - y[None]) ** 2, x[:, None] + y[None]
    chi2 = np.where(den > 0, num / np.where(den > 0, den, 1), 0).sum(-1)
    np.testing.assert_allclose(kernels.chi2_distances(x, y), chi2, rtol=1e-12)
    np.testing.assert_allclose(kernels.Kernel("chi2rbf", 0.7).matrix(x, y), np.exp(-0.7 * chi2),
                               rtol=1e-12)
    add = np.where(den > 0, 2 * x[:, None] * y[None] / np.where(den > 0, den, 1), 0).sum(-1)
    np.testing.assert_allclose(kernels.Kernel("chi2", scale=2.0).matrix(x, y), 2 * add,
                               rtol=1e-12)
    # gamma=auto: 1 / median χ² over all (here few) distinct pairs
    i, j = np.triu_indices(5, 1)
    full = kernels.chi2_distances(x, x)
    assert kernels.auto_gamma(x, "chi2rbf") == pytest.approx(1 / np.median(full[i, j]))
    assert kernels.auto_gamma(x, "poly") == pytest.approx(1 / 8)
    with pytest.raises(UsageError, match="non-negative"):
        KernelLFDA(kernel="chi2rbf").fit(x - 0.5, np.repeat([0, 1], [2, 3]))


def test_kernel_lfda_chi2rbf_on_histograms(tmp_path):
    """Non-negative (histogram-like) features: chi2rbf kLFDA, fitted round trip."""
    rng = np.random.default_rng(8)
    centres = rng.dirichlet(np.ones(16) * 0.5, size=30)
    pids = np.repeat(np.arange(30), 3)
    x = np.abs(centres[pids] + 0.02 * rng.standard_normal((90, 16)))
    arrays = KernelLFDA(dim=5, kernel="chi2rbf").fit(x, pids, None).fitted_arrays()
    assert arrays["A"].shape == (5, 90) and arrays["support"].shape == (90, 16)
    path = fitted.save(tmp_path / "kl.h5", "klfda", [arrays], hyperparameters={})
    model = fitted.load(path).for_trial(0)
    assert model.metric == "euclidean" and model.input_dim == 16
    np.testing.assert_allclose(model.transform(x[:7]),
                               KernelLFDA(dim=5, kernel="chi2rbf").fit(x, pids).transform(x[:7]),
                               rtol=1e-10, atol=1e-12)
    # training embeddings are the columns of A K
    K = kernels.Kernel.from_arrays(arrays, "klfda").matrix(x)
    np.testing.assert_allclose(model.transform(x), (arrays["A"] @ K).T, rtol=1e-9, atol=1e-12)
    with pytest.raises(FittedModelError):
        model.transform(x[:, :5])


# -- integration -------------------------------------------------------------------------------
def test_hyperparameters_and_fitted_round_trip(tmp_path):
    assert LFDA.default_params() == {"dim": 40, "beta": 0.01, "knn": 6, "solver": "auto"}
    assert KernelLFDA.default_params()["kernel"] == "chi2rbf"
    from reidcli import registry
    klfda = registry.get("klfda")
    resolved = klfda.resolve_params({"dim": 4, "beta": 0.05, "kernel": "rbf", "seed": 1})
    assert (resolved["dim"], resolved["beta"], resolved["kernel"]) == (4, 0.05, "rbf")
    xtr, ptr, q, _ = _toy(train_ids=30)
    arrays = LFDA(dim=4).fit(xtr, ptr, None).fitted_arrays()
    path = fitted.save(tmp_path / "l.h5", "lfda", [arrays], hyperparameters={"dim": 4})
    model = fitted.load(path).for_trial(0)
    np.testing.assert_allclose(model.transform(q), LFDA(dim=4).fit(xtr, ptr).transform(q),
                               rtol=1e-4, atol=1e-5)                   # float32 projection
    with pytest.raises(UsageError):
        LFDA(dim=4).fit(xtr, np.zeros(len(xtr)))                       # one person
    with pytest.raises(UsageError):
        KernelLFDA(dim=4, kernel="rbf", max_kernel_n=10).fit(xtr, ptr)
