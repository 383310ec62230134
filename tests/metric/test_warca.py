"""WARCA (Jose & Fleuret, ECCV 2016; docs/methods/warca.md): gradients, preconditioning
(Eqs. 23–24), sampler, rank weights, accuracy on a synthetic generator, AON vs Frobenius,
per-iteration cost independent of N, fitted-model round trip, Adam modes. CPU, float64."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from reidcli import fitted
from reidcli.errors import UsageError
from reidcli.metric.kernels import Kernel
from reidcli.metric.warca import WARCA
from reidcli.metric.warca_model import WARCAModel
from reidcli.metric.warca_objective import (AdamState, minibatch_objective, rank_weights,
                                            triplet_terms)

F64 = dict(dtype="float64")


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: the tests' problems are tiny, and timings are steadier."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="warca: median pairwise")
        yield
    torch.set_num_threads(before)


# -- synthetic generator -----------------------------------------------------------------------
def _synthetic(seed=0, disc=6, noise=0.35, dim=60, train_ids=150, test_ids=100):
    """D = ``dim``; ``disc`` discriminative dims μ_q + noise·ε; two cameras with fixed offsets
    o_c ~ N(0, I) on the other dims plus 2.0·ε; 2 images per camera and id. Returns training
    (x, pids, camids) and the test query / gallery (first cam-0 / first cam-1 image per id)."""
    rng = np.random.default_rng(seed)
    offsets = rng.standard_normal((2, dim - disc))

    def rows(n_ids, first_pid):
        mu = rng.standard_normal((n_ids, disc))
        pid = np.repeat(np.arange(n_ids), 4)
        cam = np.tile([0, 0, 1, 1], n_ids)
        x = np.concatenate([mu[pid] + noise * rng.standard_normal((4 * n_ids, disc)),
                            offsets[cam] + 2.0 * rng.standard_normal((4 * n_ids, dim - disc))],
                           axis=1)
        return x, pid + first_pid, cam

    x, pids, camids = rows(train_ids, 0)
    xt, _, _ = rows(test_ids, train_ids)
    query, gallery = xt[0::4], xt[2::4]            # first cam-0 and first cam-1 image of each id
    return x, pids, camids, query, gallery


def _rank1(zq, zg):
    d = (zq * zq).sum(1)[:, None] + (zg * zg).sum(1)[None] - 2 * zq @ zg.T
    return float((d.argmin(1) == np.arange(len(zq))).mean())


def _pca(x, dim):
    mean = x.mean(0)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    return lambda z: (z - mean) @ vt[:dim].T


# -- gradients ---------------------------------------------------------------------------------
def _grad_problem(seed=3):
    rng = np.random.default_rng(seed)
    x = torch.as_tensor(rng.standard_normal((12, 30)))
    trip = np.array([[0, 1, 5], [2, 3, 7], [4, 6, 11]])
    weights = np.array([1.0, 2.5, 0.7])
    return rng, x, trip, weights


@pytest.mark.parametrize("anchor,reg", [("both", "aon"), ("first", "aon"), ("both", "fro")])
def test_primal_gradient_matches_finite_differences(anchor, reg):
    rng, x, trip, weights = _grad_problem()
    W = torch.as_tensor(rng.standard_normal((4, 30)) / math.sqrt(30))
    kw = dict(lam=0.3, margin=1.0, batch=5, anchor=anchor, reg=reg)
    z = (W @ x.T).T
    _, hinge, *_ = triplet_terms(z[trip[:, 0]], z[trip[:, 1]], z[trip[:, 2]],
                                 torch.as_tensor(weights), 5, 1.0, anchor)
    assert (hinge > 0).all()                         # every triplet contributes
    for a, b in ((0, 2), (1, 2)) if anchor == "both" else ((0, 2),):
        h = 1.0 + (z[trip[:, 0]] - z[trip[:, 1]]).norm(dim=1) - (z[trip[:, a]] - z[trip[:, b]]
                                                                  ).norm(dim=1)
        assert (h.abs() > 1e-3).all()                # away from the hinge kinks
    J, grad = minibatch_objective(W, x, trip, weights, **kw)
    # autograd on the same J_B
    Wr = W.clone().requires_grad_(True)
    Jr, _ = minibatch_objective(Wr, x, trip, weights, **kw)
    (auto,) = torch.autograd.grad(Jr, Wr)
    np.testing.assert_allclose(grad.numpy(), auto.numpy(), rtol=1e-10, atol=1e-12)
    # central differences, h = 1e-6
    fd = np.zeros(W.shape)
    for p in range(W.shape[0]):
        for q in range(W.shape[1]):
            e = torch.zeros_like(W)
            e[p, q] = 1e-6
            fd[p, q] = (float(minibatch_objective(W + e, x, trip, weights, **kw)[0])
                        - float(minibatch_objective(W - e, x, trip, weights, **kw)[0])) / 2e-6
    assert np.linalg.norm(fd - grad.numpy()) <= 1e-6 * np.linalg.norm(fd)
    assert float(J) > 0


def test_kernel_preconditioned_gradient_equals_primal_step():
    """K = XXᵀ, W = AX: G̃_A = (∇_A J_B)K⁻¹ and (A − ηG̃_A)X = W − η∇_W J_B."""
    rng, x, trip, weights = _grad_problem()
    K = x @ x.T
    A = torch.as_tensor(rng.standard_normal((4, 12)) / math.sqrt(12) / 5)
    kw = dict(lam=0.3, margin=1.0, batch=5, anchor="both", reg="aon")
    Ar = A.clone().requires_grad_(True)
    J_A, g_pre = minibatch_objective(Ar, K, trip, weights, kernel=True, **kw)
    (g_plain,) = torch.autograd.grad(J_A, Ar)
    g_pre = g_pre.detach()
    np.testing.assert_allclose(g_pre.numpy(), torch.linalg.solve(K, g_plain.T).T.numpy(),
                               atol=1e-10 * float(g_pre.abs().max()))
    W = A @ x
    J_W, g_W = minibatch_objective(W, x, trip, weights, **kw)
    assert float(J_W) == pytest.approx(float(J_A.detach()), rel=1e-12)
    eta = 0.05
    np.testing.assert_allclose(((A - eta * g_pre) @ x).numpy(), (W - eta * g_W).numpy(),
                               atol=1e-10)


@pytest.mark.parametrize("kernel,batch,table", [("none", 512, False), ("none", 16, False),
                                                 ("none", 512, True), ("linear", 64, False),
                                                 ("rbf", 64, True)])
def test_step_is_the_reference_update(kernel, batch, table):
    """One SGD step (all-row projection, touched rows, distance table; primal and
    preconditioned kernel) equals −η × the gradient of the sampled triplets (Eqs. 20–24)."""
    x, pids, camids, _, _ = _synthetic(train_ids=50)
    tr = WARCA(dim=4, batch_size=batch, max_draws=64, lr=0.05, lam=0.2, optimizer="sgd",
               rank_weight="harmonic", kernel=kernel, **F64).trainer(x, pids, camids)
    tr.run(3)
    if table:
        tr._draw_estimate = 1e4                      # force the anchors × rows tables
    seen = {}
    sample = tr.sample_negatives

    def spy(i, j, *args):
        seen["i"], seen["j"] = i, j
        seen["out"] = sample(i, j, *args)
        return seen["out"]

    tr.sample_negatives = spy
    before = tr.params.clone()
    tr.step()
    found, n, k, _ = seen["out"]
    sel = found.numpy()
    assert sel.sum() > 0
    trip = np.stack([seen["i"].numpy(), seen["j"].numpy(), k.numpy()], 1)[sel]
    w = rank_weights(n[found], "harmonic", tr.s_eff, tr.negatives[seen["i"][found]])
    _, grad = minibatch_objective(before, tr.F, trip, w.numpy(), lam=0.2, batch=batch,
                                  kernel=kernel != "none")
    np.testing.assert_allclose(tr.params.numpy(), (before - 0.05 * grad).numpy(), atol=1e-12)


# -- sampler and rank weights ------------------------------------------------------------------
def test_pairs_are_uniform_over_unordered_same_pid_pairs():
    from scipy.stats import chisquare
    counts = [2, 3, 4, 5, 1, 1, 1]
    pids = np.repeat(np.arange(len(counts)), counts)
    x = np.random.default_rng(0).standard_normal((len(pids), 3))
    tr = WARCA(dim=2, seed=1, **F64).trainer(x, pids, None)
    i, j = (t.numpy() for t in tr.sample_pairs(200_000))
    assert (pids[i] == pids[j]).all() and (i != j).all()
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    key = lo * len(pids) + hi
    a, b = np.nonzero(np.triu(pids[:, None] == pids[None, :], 1))
    expected = set(a * len(pids) + b)
    assert set(np.unique(key)) == expected             # 1 + 3 + 6 + 10 = 20 pairs
    freq = np.array([np.sum(key == e) for e in sorted(expected)])
    assert chisquare(freq).pvalue > 1e-3
    # both orders occur (anchor "first" keeps the random order)
    assert 0.45 < np.mean(i < j) < 0.55


def test_cross_camera_positives_are_uniform_over_cross_camera_pairs():
    from scipy.stats import chisquare
    cams = np.array([0, 0, 0, 1] + [0, 0, 1, 1] + [0, 1] + [2, 2, 2])   # 3 + 4 + 1 + 0 pairs
    pids = np.repeat(np.arange(4), [4, 4, 2, 3])
    x = np.random.default_rng(0).standard_normal((len(pids), 3))
    tr = WARCA(dim=2, positives="cross-camera", **F64).trainer(x, pids, cams)
    i, j = (t.numpy() for t in tr.sample_pairs(40_000))
    assert (pids[i] == pids[j]).all() and (cams[i] != cams[j]).all()
    key = np.minimum(i, j) * 100 + np.maximum(i, j)
    values, freq = np.unique(key, return_counts=True)
    assert len(values) == 8 and chisquare(freq).pvalue > 1e-3


def _trainer(margin, anchor="both", n_ids=60, **kw):
    rng = np.random.default_rng(0)
    pids = np.repeat(np.arange(n_ids), 3)
    x = rng.standard_normal((len(pids), 5))
    kw = {"dim": 3, "batch_size": 300, "max_draws": 512, **F64, **kw}
    return WARCA(margin=margin, anchor=anchor, **kw).trainer(x, pids, None), pids


def test_sampler_extreme_margins_and_negatives():
    tr, pids = _trainer(1e9)
    i, j = tr.sample_pairs(300)
    zi, zj = tr._project(i), tr._project(j)
    found, n, k, _ = tr.sample_negatives(i, j, zi, zj)
    assert tr.s_eff == 180 and found.all() and (n == 1).all()
    assert (pids[k.numpy()] != pids[i.numpy()]).all()  # negatives never share the pid
    w = rank_weights(n, "log", tr.s_eff)
    np.testing.assert_allclose(w.numpy(), 1 + math.log(180))
    # γ = −1e9: no violator, zero loss, the update is the regulariser's alone (SGD)
    tr, _ = _trainer(-1e9, optimizer="sgd", lr=0.1, lam=0.5)
    before = tr.params.clone()
    stats = tr.step()
    assert float(stats["violation_rate"]) == 0 and float(stats["mean_draws"]) == tr.s_eff
    gram = before @ before.T - torch.eye(3, dtype=before.dtype)
    np.testing.assert_allclose(tr.params.numpy(), (before - 0.1 * 2 * 0.5 * gram @ before
                                                   ).numpy(), atol=1e-14)
    assert float(stats["objective"]) == pytest.approx(0.25 * float((gram ** 2).sum()))


def test_half_violating_negatives_give_mean_two_draws():
    """Anchors at the origin, 50 negatives at distance 0.5 (violate γ = 1) and 50 at 2."""
    x = np.zeros((102, 2))
    x[2:52, 0] = 0.5
    x[52:, 0] = 2.0
    pids = np.r_[0, 0, np.arange(1, 101)]
    tr = WARCA(dim=2, anchor="first", batch_size=4096, **F64).trainer(x, pids, None)
    tr.params = torch.eye(2, dtype=torch.float64)
    i, j = tr.sample_pairs(4096)
    found, n, k, _ = tr.sample_negatives(i, j, tr._project(i), tr._project(j))
    assert found.all() and (k.numpy() >= 2).all() and (k.numpy() < 52).all()
    assert float(n.double().mean()) == pytest.approx(2.0, rel=0.05)


def test_rank_weight_formulas():
    assert float(rank_weights(np.array(1), "log", 100)) == pytest.approx(1 + math.log(100))
    assert float(rank_weights(np.array(100), "log", 100)) == pytest.approx(1.0)
    h22 = sum(1 / s for s in range(1, 23))               # ⌊90/4⌋ = 22
    assert float(rank_weights(np.array(4), "harmonic", 100, 90)) == pytest.approx(h22)
    assert float(rank_weights(np.array(4), "uniform", 100, 90)) == 22
    assert float(rank_weights(np.array(200), "harmonic", 100, 90)) == pytest.approx(1.0)
    tw = rank_weights(torch.tensor([4, 200]), "harmonic", 100, torch.tensor([90, 90]))
    np.testing.assert_allclose(tw.numpy(), [h22, 1.0], rtol=1e-12)
    assert float(rank_weights(torch.tensor([7]), "uniform", 100, torch.tensor([90]))) == 12
    tr, _ = _trainer(1.0, n_ids=10)                        # S_eff = min(S, N)
    assert tr.s_eff == 30


# -- accuracy ----------------------------------------------------------------------------------
def test_warca_beats_euclidean_and_pca():
    x, pids, camids, q, g = _synthetic()
    euclid = _rank1(q, g)
    pca = _pca(x, 6)
    r_pca = _rank1(pca(q), pca(g))
    common = dict(dim=6, lam=1e-3, lr=0.1, batch_size=256, max_draws=128, iterations=300,
                  seed=0, **F64)
    model = WARCA(**common).fit(x, pids, camids)
    r_warca = _rank1(model.transform(q), model.transform(g))
    assert r_warca >= 0.40 and r_warca >= max(euclid, r_pca) + 0.30, (euclid, r_pca, r_warca)
    for kernel in ("linear", "rbf"):
        km = WARCA(kernel=kernel, **common).fit(x, pids, camids)
        r = _rank1(km.transform(q), km.transform(g))
        assert r >= 0.15 and r >= euclid + 0.10, (kernel, euclid, r)
    assert km.gamma_ > 0


def test_aon_keeps_conditioning_where_frobenius_collapses():
    x, pids, camids, q, g = _synthetic(disc=16, noise=0.6)
    common = dict(dim=8, lam=100.0, lr=0.01, batch_size=256, max_draws=128, iterations=300,
                  seed=0, **F64)
    aon = WARCA(reg="aon", **common).fit(x, pids, camids)
    fro = WARCA(reg="fro", **common).fit(x, pids, camids)
    s_aon, s_fro = aon.singular_values_, fro.singular_values_
    np.testing.assert_allclose(s_aon, np.linalg.svd(aon.W_, compute_uv=False))
    assert s_aon.min() / s_aon.max() >= 0.8, s_aon
    assert s_fro.min() / s_fro.max() <= 0.2, s_fro
    r_aon = _rank1(aon.transform(q), aon.transform(g))
    r_fro = _rank1(fro.transform(q), fro.transform(g))
    assert r_aon >= r_fro + 0.10, (r_aon, r_fro)


# -- per-iteration cost independent of N -------------------------------------------------------
class _WideOps(TorchFunctionMode):
    """Records every torch call made while active that reads or makes a tensor with a
    dimension of ``n`` (a pass over all N training rows), and the rows gathered from
    ``source`` [N, D]. Row gathers (``t[idx]``, ``index_select``) read only the picked rows
    and binary searches (``searchsorted``) log₂ of the sorted side, so their inputs are
    exempt; their outputs are not."""

    def __init__(self, n: int, source):
        super().__init__()
        self.n, self.source = n, source
        self.calls: list[str] = []
        self.gathered = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", repr(func))
        if name in ("__getitem__", "index_select") and args and args[0] is self.source:
            self.gathered += out.shape[0]
        exempt = name in ("__getitem__", "index_select", "searchsorted")
        seen = ([] if exempt else [*args, *kwargs.values()]) + \
            [*(out if isinstance(out, (tuple, list)) else (out,))]
        if any(isinstance(t, torch.Tensor) and self.n in t.shape
               for t in seen):
            self.calls.append(name)
        return out


def test_iteration_work_does_not_grow_with_n():
    # N = 200k rows, B = 128 pairs, S = 32 draws, γ = −1e9 (no negative violates, so every
    # pair uses all S counted draws): a step gathers the anchors i, j, the S counted draws and
    # the returned k per pair, B·(3 + S) rows, plus the rare uncounted same-pid draws (4 rows
    # per id); no call may read or make a tensor of all N rows.
    # Wall-clock scaling is measured by `python -m benchmarks.warca_speed`.
    rng = np.random.default_rng(0)
    batch, draws = 128, 32

    def trainer(n):
        x = rng.standard_normal((n, 64))
        return WARCA(dim=16, batch_size=batch, max_draws=draws, margin=-1e9,
                     **F64).trainer(x, np.repeat(np.arange(n // 4), 4), None)

    def traced_steps(n, steps=5):
        tr = trainer(n)
        for _ in range(3):                        # the draws-per-pair estimate settles
            tr.step()
        with _WideOps(n, tr.F) as ops:
            for _ in range(steps):
                tr.step()
        return ops

    ops = traced_steps(200_000)
    assert ops.calls == [], ops.calls
    per_step = batch * (3 + draws)
    assert 5 * per_step <= ops.gathered <= 5 * 2 * per_step, ops.gathered
    # the trace sees O(N) work: N = 2k < B·(2 + S) rows, so that trainer projects all rows
    assert {"matmul", "__matmul__"} & set(traced_steps(2_000, steps=1).calls)


# -- fitted round trip -------------------------------------------------------------------------
def test_fitted_round_trip_linear(tmp_path):
    x, pids, camids, q, g = _synthetic(train_ids=40, test_ids=10)
    arrays = WARCA(dim=5, iterations=20, batch_size=64, snapshot_every=10,
                   **F64).fit(x, pids, camids).fitted_arrays()
    assert arrays["W"].shape == (5, 60) and arrays["singular_values"].shape == (5,)
    assert list(arrays["log"]["iter"]) == [10, 20] and set(arrays["snapshots"]) == {"10", "20"}
    path = fitted.save(tmp_path / "m.h5", "warca", [arrays], WARCA.default_params())
    model = fitted.load(path).for_trial(0)
    assert model.metric == "sqeuclidean" and model.input_dim == 60
    z = model.transform(q)
    np.testing.assert_array_equal(z, WARCAModel(W=arrays["W"]).transform(q))
    np.testing.assert_allclose(z, q @ arrays["W"].T, rtol=1e-12)
    # the embedding's squared distances are the Mahalanobis distances with M = WᵀW
    M = arrays["W"].T @ arrays["W"]
    zg = model.transform(g)
    delta = q[:, None] - g[None]
    np.testing.assert_allclose(((z[:, None] - zg[None]) ** 2).sum(-1),
                               np.einsum("qgd,de,qge->qg", delta, M, delta), rtol=1e-9)


def test_fitted_round_trip_kernel_chi2(tmp_path):
    rng = np.random.default_rng(1)
    pids = np.repeat(np.arange(20), 3)
    x = rng.gamma(0.5, 1.0, (60, 12)) + rng.gamma(2.0, 1.0, (20, 12))[pids]
    x[:, 0] = 0.0                                  # a bin empty everywhere (a+b = 0 skipped)
    arrays = WARCA(dim=4, kernel="chi2rbf", iterations=15, batch_size=32, normalize="l2",
                   **F64).fit(x, pids, np.zeros(60)).fitted_arrays()
    assert arrays["A"].shape == (4, 60) and arrays["support"].shape == (60, 12)
    model = fitted.load(fitted.save(tmp_path / "k.h5", "warca", [arrays],
                                    {"kernel": "chi2rbf"})).for_trial(0)
    K = Kernel("chi2rbf", float(arrays["gamma"])).matrix(arrays["support"])
    np.testing.assert_allclose(model.transform(x), (arrays["A"] @ K).T, rtol=1e-9, atol=1e-12)
    # γ auto = 1 / median χ² over the distinct pairs (all 1770 of them here)
    s = arrays["support"]
    chi2 = np.array([[np.sum(np.divide((a - b) ** 2, a + b, out=np.zeros_like(a),
                                       where=(a + b) > 0)) for b in s] for a in s])
    assert float(arrays["gamma"]) == pytest.approx(1 / np.median(chi2[np.triu_indices(60, 1)]))
    ev = np.sqrt(np.clip(np.linalg.eigvalsh(arrays["A"] @ K @ arrays["A"].T), 0, None))
    np.testing.assert_allclose(np.sort(arrays["singular_values"]), np.sort(ev), rtol=1e-8)
    with pytest.raises(UsageError):
        WARCA(kernel="chi2rbf", iterations=1).fit(-x, pids, None)


def test_hyperparameter_errors():
    x = np.random.default_rng(0).standard_normal((8, 3))
    pids = np.repeat(np.arange(4), 2)
    with pytest.raises(UsageError):
        WARCA(no_such=1)
    with pytest.raises(UsageError):
        WARCA(rank_weight="cubic").fit(x, pids)
    with pytest.raises(UsageError):
        WARCA().trainer(x, np.arange(8), None)       # no positive pair
    with pytest.raises(UsageError):
        WARCA(kernel="rbf", max_kernel_n=4).trainer(x, pids, None)
    assert WARCA(kernel=None, normalize=None)._validated_params()["kernel"] == "none"


def test_options_and_cross_validation():
    x, pids, camids, q, g = _synthetic(train_ids=40, test_ids=10)
    for opts in (dict(rank_weight="uniform", anchor="first"), dict(adam_bias="standard"),
                 dict(kernel="poly", normalize="l2"), dict(positives="cross-camera")):
        z = WARCA(dim=3, iterations=5, batch_size=32, **F64, **opts).fit(x, pids, camids
                                                                          ).transform(q)
        assert z.shape == (10, 3) and np.isfinite(z).all()
    est = WARCA(dim=4, iterations=30, batch_size=64, cv=True, cv_lams="1e-3,1e3",
                cv_lrs=[0.1], **F64).fit(x, pids, camids)
    assert est.cv_["rank1"].shape == (2, 1) and len(est.cv_["val_ids"]) == 8
    assert est.hyper_["lam"] in (1e-3, 1e3) and est.hyper_["lr"] == 0.1
    assert est.fitted_arrays()["cv"]["rank5"].shape == (2, 1)


# -- Adam modes --------------------------------------------------------------------------------
def test_adam_bias_modes():
    g = torch.tensor([3.0, -0.5, 2e-3], dtype=torch.float64)
    steps = {}
    for mode in ("constant", "standard"):
        p = torch.zeros(3, dtype=torch.float64)
        opt = AdamState(p, lr=0.1, bias=mode)
        opt.step(p, g)
        np.testing.assert_allclose(p.numpy(), -0.1 * np.sign(g.numpy()), rtol=1e-4)
        before = p.clone()
        opt.step(p, g)
        steps[mode] = (p - before).numpy()
    b1, b2 = 0.9, 0.999
    expected = ((1 - b1 ** 2) / (1 - b1)) / math.sqrt((1 - b2 ** 2) / (1 - b2))
    np.testing.assert_allclose(steps["constant"] / steps["standard"], expected, rtol=1e-5)
