"""KISSME — "Keep It Simple and Straightforward MEtric" (Köstinger et al., CVPR 2012) as
docs/methods/kissme.md (the [8] protocol) describes it.

1. PCA on the training rows (:func:`reidcli.metric.pca.pca_basis`): k = ``dim`` when given,
   else the smallest k keeping ``variance`` (0.95, as the WARCA paper says) of the variance.
2. Σ_S = mean of δδᵀ over all unordered same-pid pairs (δ = u_i − u_j in PCA space), from
   class sums: Σ_{i<j in c} δδᵀ = n_c Σ_i u_iu_iᵀ − s_c s_cᵀ.
3. Σ_D = mean of δδᵀ over ``neg_ratio`` × #positives random distinct different-pid pairs
   (10, as [8]); ``neg_ratio=0`` uses all different-pid pairs (exact, from totals).
4. M = Σ_S⁻¹ − Σ_D⁻¹ (Köstinger Eq. 15–16), then (``psd="clip"``) the negative eigenvalues are
   set to 0 (docs/methods/kissme.md; Köstinger's release instead lifts eigenvalues ≤ 1e-10 to 1e-6 when M
   is not positive definite — a negligible difference). ``psd="none"`` keeps M indefinite.
   ``ridge`` > 0 adds ridge·tr(Σ)/k·I to both covariances (0 = the published method).

Distance d(x, y) = (Pᵀ(x − y))ᵀ M (Pᵀ(x − y)), the ``mahalanobis`` model of docs/methods/kissme.md:
arrays ``P`` [D, k], ``M`` [k, k], ``mean`` [D]. Camera ids are not used.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from reidcli.errors import FittedModelError, UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.fitted import TrialModel
from reidcli.metric.kernels import check_features, check_labels, count_pairs, negative_pairs
from reidcli.metric.constraints import SEED, check_dim
from reidcli.metric.pca import DIM, VARIANCE, pca_basis
from reidcli.naming import param
from reidcli.params import NONE, Interval, Options
from reidcli.registry import register

PSD_MODES = ("clip", "none")
#: rows per block when accumulating sampled pair differences
_PAIR_BLOCK = 65536


def same_pair_scatter(u, pids) -> tuple[np.ndarray, int]:
    """(Σ over unordered same-pid pairs of δδᵀ [k, k], number of pairs) for u [N, k]."""
    classes, inverse, counts = np.unique(pids, return_inverse=True, return_counts=True)
    sums = np.zeros((len(classes), u.shape[1]))
    np.add.at(sums, inverse, u)
    weighted = u * counts[inverse][:, None]                  # n_c u_i
    scatter = weighted.T @ u - sums.T @ sums                 # Σ_c n_c Σ u uᵀ − s_c s_cᵀ
    return 0.5 * (scatter + scatter.T), int((counts * (counts - 1) // 2).sum())


def all_pair_scatter(u) -> np.ndarray:
    """Σ over all unordered pairs of δδᵀ = N uᵀu − s sᵀ for u [N, k]."""
    s = u.sum(0)
    out = len(u) * (u.T @ u) - np.outer(s, s)
    return 0.5 * (out + out.T)


def pair_scatter(u, pairs) -> np.ndarray:
    """Σ over the given pairs [M, 2] of δδᵀ (blocked) for u [N, k]."""
    out = np.zeros((u.shape[1], u.shape[1]))
    for s in range(0, len(pairs), _PAIR_BLOCK):
        p = pairs[s:s + _PAIR_BLOCK]
        delta = u[p[:, 0]] - u[p[:, 1]]
        out += delta.T @ delta
    return out


def _inverse(sigma: np.ndarray, name: str, pairs: int) -> np.ndarray:
    values, vectors = scipy.linalg.eigh(sigma)
    if not values[-1] > 0 or values[0] <= values[-1] * 1e-12:
        raise UsageError(f"KISSME: {name} is singular in {len(sigma)} PCA dimensions ({pairs} "
                         "pairs)", f"lower {param('dim')} or {param('variance')}, or set "
                         f"{param('ridge', '1e-3')}")
    return (vectors / values[None, :]) @ vectors.T


def kissme_metric(u, pids, *, neg_ratio: float = 10, psd: str = "clip", ridge: float = 0.0,
                  rng: np.random.Generator | None = None) -> tuple[np.ndarray, dict]:
    """M [k, k] of KISSME on (already reduced) rows u [N, k] and pids [N], plus a dict with
    ``sigma_same``, ``sigma_diff``, ``n_same``, ``n_diff``, ``eigenvalues`` (of M before
    clipping, descending)."""
    rng = np.random.default_rng(0) if rng is None else rng
    scatter_s, n_same = same_pair_scatter(u, pids)
    _, n_neg_total = count_pairs(pids)
    if n_same == 0:
        raise UsageError("KISSME: no two training rows share a person id",
                         "train on persons with at least two images")
    if n_neg_total == 0:
        raise UsageError("KISSME: all training rows share one person id",
                         "train on at least two persons")
    if neg_ratio == 0:
        scatter_d, n_diff = all_pair_scatter(u) - scatter_s, n_neg_total
    else:
        pairs = negative_pairs(pids, int(round(neg_ratio * n_same)), rng)
        scatter_d, n_diff = pair_scatter(u, pairs), len(pairs)
    sigma_s, sigma_d = scatter_s / n_same, scatter_d / n_diff
    k = u.shape[1]
    if ridge > 0:
        sigma_s = sigma_s + ridge * np.trace(sigma_s) / k * np.eye(k)
        sigma_d = sigma_d + ridge * np.trace(sigma_d) / k * np.eye(k)
    m = _inverse(sigma_s, "Σ_S", n_same) - _inverse(sigma_d, "Σ_D", n_diff)   # Eq. 15–16
    m = 0.5 * (m + m.T)
    values, vectors = scipy.linalg.eigh(m)
    if psd == "clip":                                         # PSD cone: clip λ < 0 to 0
        m = (vectors * np.maximum(values, 0.0)[None, :]) @ vectors.T
        m = 0.5 * (m + m.T)
    return m, {"sigma_same": sigma_s, "sigma_diff": sigma_d, "n_same": n_same,
               "n_diff": n_diff, "eigenvalues": values[::-1].copy()}


@register("kissme", stage="train", paper="Köstinger et al., CVPR 2012",
          summary="KISSME after PCA: M = Σ_S⁻¹ − Σ_D⁻¹ projected to the PSD cone.",
          hidden=["variance", "neg_ratio", "psd", "ridge"])
class KISSME(Estimator):
    """KISSME estimator.

    ``KISSME(dim=None, variance=0.95, neg_ratio=10, psd="clip", ridge=0.0, seed=0)
    .fit(X [N, D], pids [N])`` sets ``mean_`` [D], ``projection_`` P [D, k], ``metric_``
    M [k, k] and ``eigenvalues_`` (of M before clipping). ``distance(Xq [q, D], Xg [g, D])
    -> [q, g]`` squared Mahalanobis distances; ``transform`` (PSD M only) gives L with
    ‖L(x − y)‖² = d(x, y), [n, D] → [n, k]. Fitted arrays: ``P``, ``M``, ``mean``.
    """

    _parameter_constraints = {"dim": [DIM, NONE], "variance": [VARIANCE, NONE],
                              "neg_ratio": [Interval(float, 0, None)],
                              "psd": [Options(PSD_MODES)], "ridge": [Interval(float, 0, None)],
                              "seed": [SEED]}
    _parameter_help = {"dim": "PCA dimension k (default: keep `variance` of the variance).",
                       "variance": "Variance fraction kept by the PCA when dim is not set.",
                       "neg_ratio": "Negative pairs per positive pair (0 = all).",
                       "psd": "clip: project M to the PSD cone; none: keep it indefinite.",
                       "ridge": "Ridge added to both covariances (0 = the published method).",
                       "seed": "Seed of the negative-pair draw."}

    _quick_params = {"dim": 8}

    def __init__(self, dim: int | None = None, variance: float | None = 0.95,
                 neg_ratio: float = 10, psd: str = "clip", ridge: float = 0.0, seed: int = 0):
        store_params(self, locals())

    def fit(self, X, pids, camids=None) -> "KISSME":
        p = self._validated_params()
        x = check_features(X, "KISSME training features", min_rows=2)
        pids, _ = check_labels(len(x), pids, camids, "KISSME training set")
        if p["dim"] is None and p["variance"] is None:
            raise UsageError("KISSME needs a PCA dim or a variance fraction",
                             "e.g. variance=0.95")
        check_dim("KISSME", p["dim"], x.shape[1], "the input features")
        mean, proj, _, _ = pca_basis(x, p["dim"], None if p["dim"] is not None
                                     else p["variance"])
        u = (x - mean) @ proj
        m, info = kissme_metric(u, pids, neg_ratio=p["neg_ratio"], psd=p["psd"],
                                ridge=p["ridge"], rng=np.random.default_rng(p["seed"]))
        self.mean_, self.projection_, self.metric_ = mean, proj, m
        self.eigenvalues_ = info["eigenvalues"]
        self.sigma_same_, self.sigma_diff_ = info["sigma_same"], info["sigma_diff"]
        self.n_features_in_ = x.shape[1]
        return self

    def fitted_arrays(self) -> dict:
        """Fitted-model arrays: ``P`` [D, k], ``M`` [k, k], ``mean`` [D]."""
        self._check_fitted("metric_")
        return {"P": self.projection_, "M": self.metric_, "mean": self.mean_}

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters) -> "MahalanobisModel":
        missing = [k for k in ("P", "M") if k not in arrays]
        if missing:
            raise FittedModelError(f"kissme trial lacks {', '.join(missing)}",
                                   "re-fit the model")
        return MahalanobisModel(arrays["P"], arrays["M"], arrays.get("mean"))

    def distance(self, Xq, Xg) -> np.ndarray:
        self._check_fitted("metric_")
        return self.fitted_model().distance(Xq, Xg)

    def transform(self, X) -> np.ndarray:
        self._check_fitted("metric_")
        values, vectors = scipy.linalg.eigh(self.metric_)
        if values.min() < -1e-10 * max(abs(values).max(), 1e-300):
            raise UsageError("KISSME transform needs a PSD metric (psd='clip')",
                             "use distance(), or fit with psd='clip'")
        root = vectors * np.sqrt(np.maximum(values, 0.0))[None, :]
        x = check_features(X, "KISSME input features")
        return ((x - self.mean_) @ self.projection_) @ root


class MahalanobisModel(TrialModel):
    """``mahalanobis`` model (docs/methods/kissme.md): d(x, y) = (Pᵀδ)ᵀ M (Pᵀδ), δ = x − y, with
    P [D, k], M [k, k] (may be indefinite; ranking is by the raw value) and optional mean [D]
    (subtracted first, for numerical range only). ``distance([q, D], [g, D]) -> [q, g]``."""

    metric = "mahalanobis"

    def __init__(self, P, M, mean=None):
        self.P = np.asarray(P, dtype=np.float64)
        self.M = np.asarray(M, dtype=np.float64)
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
        if self.P.ndim != 2 or self.M.shape != (self.P.shape[1],) * 2:
            raise FittedModelError(f"mahalanobis model: P has shape {self.P.shape} and M "
                                   f"{self.M.shape}; expected [D, k] and [k, k]",
                                   "re-fit the model")
        if self.mean is not None and self.mean.shape != (self.P.shape[0],):
            raise FittedModelError(f"mahalanobis model: mean has shape {self.mean.shape}, "
                                   f"expected ({self.P.shape[0]},)", "re-fit the model")

    @property
    def input_dim(self) -> int:  # type: ignore[override]
        return int(self.P.shape[0])

    def transform(self, features) -> np.ndarray:
        """u = Pᵀ(x − mean): [n, D] → [n, k] float64."""
        x = self.check_input(features, np.float64)
        return (x if self.mean is None else x - self.mean) @ self.P

    def embedded_distance(self, query, gallery) -> np.ndarray:
        """[q, k] × [g, k] projected rows → [q, g] float64: a_q + a_g − 2 (u_q M)·u_g."""
        from reidcli.metric.xqda import quadratic_distances
        return quadratic_distances(query, gallery, self.M)
