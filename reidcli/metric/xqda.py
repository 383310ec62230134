"""XQDA — Cross-view Quadratic Discriminant Analysis (Liao et al., CVPR 2015), as cdpcf.md §4
states it; shared by C-DPCF/DPCF/AvgP (one XQDA per layer and map) and ``reid train xqda``.

Covariances come from class sums (the closed-form cross-camera pair statistics of cdpcf.md
§3.3 with E = 1), never from enumerating pairs.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from reidcli.errors import UsageError
from reidcli.pooling.weight_maps import CrossCameraScatter

SOLVERS = ("svd", "eigh")


def span_basis(x: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis B [d, N'] of the row span of x [N, d] (cdpcf.md §4.1).

    From the Gram matrix: x x^T = U Λ U^T, keep λ > tol·max λ, B = x^T U Λ^{-1/2}.
    """
    gram = x @ x.T
    values, vectors = scipy.linalg.eigh(0.5 * (gram + gram.T))
    keep = values > tol * max(values.max(), 0.0)
    if not keep.any():
        raise UsageError("XQDA training features are all zero", "check the features")
    return (x.T @ vectors[:, keep]) / np.sqrt(values[keep])[None, :]


class XQDA:
    """XQDA metric learner (scikit-learn style).

    ``fit(X [N, d], pids [N], camids [N])`` sets ``projection_`` W [d, r], ``metric_`` M [r, r]
    (symmetric), ``eigenvalues_`` (all values the rank is chosen from, descending) and
    ``rank_``. ``distance(Xq, Xg)`` = (W^T x − W^T z)^T M (W^T x − W^T z) [q, g].
    """

    def __init__(self, lam: float = 0.001, solver: str = "svd", max_dims: int | None = None):
        if solver not in SOLVERS:
            raise UsageError(f"--xqda-solver {solver!r} is unknown",
                             f"choose one of {', '.join(SOLVERS)}")
        if lam < 0:
            raise UsageError(f"--xqda-lambda {lam} must be ≥ 0", "use the default 0.001")
        if max_dims is not None and max_dims < 1:
            raise UsageError(f"--xqda-dims {max_dims} must be ≥ 1", "omit it for the automatic rank")
        self.lam = float(lam)
        self.solver = solver
        self.max_dims = max_dims

    def fit(self, x: np.ndarray, pids: np.ndarray, camids: np.ndarray) -> "XQDA":
        x = np.asarray(x, dtype=np.float64)
        pids = np.asarray(pids)
        camids = np.asarray(camids)
        if x.ndim != 2 or len(x) != len(pids) or len(x) != len(camids):
            raise UsageError(f"XQDA needs features [N, d] with N labels; got {x.shape}, "
                             f"{len(pids)} pids, {len(camids)} camids", "check the inputs")
        if not np.isfinite(x).all():
            raise UsageError("XQDA training features hold NaN or Inf", "fix the features")
        basis = span_basis(x) if x.shape[1] > x.shape[0] else None        # §4.1
        xr = x if basis is None else x @ basis
        scatter = CrossCameraScatter(pids, camids, xr.shape[1], camera_specific=False,
                                     context="XQDA training set")
        scatter.add(np.arange(len(xr)), xr[:, None, :])
        cov = scatter.result()                                            # §4.2: Σ_I, Σ_E
        sigma_i = cov.sigma_same + self.lam * np.eye(xr.shape[1])         # §4.3
        sigma_e = cov.sigma_diff
        if self.solver == "svd":                                          # §4.4 (release)
            u, values, _ = scipy.linalg.svd(np.linalg.solve(sigma_i, sigma_e))
        else:                                                             # §4.4 (paper)
            values, u = scipy.linalg.eigh(0.5 * (sigma_e + sigma_e.T),
                                          0.5 * (sigma_i + sigma_i.T))
            values, u = values[::-1], u[:, ::-1]
        rank = int((values > 1).sum())                                    # §4.5
        if rank == 0:
            warnings.warn("XQDA: no generalized eigenvalue exceeds 1; keeping one dimension "
                          "(the metric is not discriminative)", stacklevel=2)
            rank = 1
        if self.max_dims is not None:
            rank = min(rank, self.max_dims)
        v = u[:, :rank]
        metric = (np.linalg.inv(v.T @ sigma_i @ v)                        # §4.6
                  - np.linalg.inv(v.T @ sigma_e @ v))
        self.metric_ = 0.5 * (metric + metric.T)
        self.projection_ = v if basis is None else basis @ v
        self.eigenvalues_ = np.asarray(values, dtype=np.float64)
        self.rank_ = rank
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        """W^T x per row: [n, d] → [n, r]."""
        return np.asarray(x, dtype=np.float64) @ self.projection_

    def distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        """Mahalanobis distances [q, g] in the learned subspace (§4.7)."""
        return quadratic_distances(self.transform(query), self.transform(gallery),
                                   self.metric_)


def quadratic_distances(uq: np.ndarray, ug: np.ndarray, metric: np.ndarray) -> np.ndarray:
    """(u_q − u_g)^T M (u_q − u_g) = a_q + a_g − 2 (u_q M)·u_g for all pairs: [q, g]."""
    qm = uq @ metric
    gm = ug @ metric
    aq = np.einsum("ij,ij->i", qm, uq)
    ag = np.einsum("ij,ij->i", gm, ug)
    return aq[:, None] + ag[None, :] - 2.0 * (qm @ ug.T)


# -- fitted-model integration (``reid train xqda`` → ``reid eval --model``) -----------------
PREPROCESSING = ("center-l2", "l2", "none")


def preprocess(x: np.ndarray, mode: str, mean: np.ndarray | None) -> np.ndarray:
    """The features XQDA sees: ``center-l2`` = (x − μ)/‖x − μ‖ (cdpcf.md §3.6), ``l2``, or
    ``none``. x [n, d] → float64 [n, d]."""
    x = np.asarray(x, dtype=np.float64)
    if mode == "center-l2":
        x = x - mean[None, :]
    if mode in ("center-l2", "l2"):
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x


class XQDAModel:
    """A fitted XQDA trial: ``distance(query [q, d], gallery [g, d]) -> [q, g]``."""

    metric = "xqda"

    def __init__(self, proj: np.ndarray, metric: np.ndarray, mean: np.ndarray | None,
                 normalize: str):
        self.proj = np.asarray(proj, dtype=np.float64)
        self.M = np.asarray(metric, dtype=np.float64)
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.normalize = normalize

    @property
    def input_dim(self) -> int:
        return int(self.proj.shape[0])

    def distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        uq = preprocess(query, self.normalize, self.mean) @ self.proj
        ug = preprocess(gallery, self.normalize, self.mean) @ self.proj
        return quadratic_distances(uq, ug, self.M)


def fit_xqda_arrays(x: np.ndarray, pids: np.ndarray, camids: np.ndarray, *, lam: float = 0.001,
                    solver: str = "svd", max_dims: int | None = None,
                    normalize: str = "center-l2") -> dict:
    """Fit one trial: ``{"proj" float32 [d, r], "metric" [r, r], "mean" [d]}``."""
    if normalize not in PREPROCESSING:
        raise UsageError(f"--normalize {normalize!r} is unknown",
                         f"choose one of {', '.join(PREPROCESSING)}")
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(0)
    model = XQDA(lam=lam, solver=solver, max_dims=max_dims).fit(
        preprocess(x, normalize, mean), pids, camids)
    return {"proj": model.projection_.astype(np.float32), "metric": model.metric_, "mean": mean}


def _factory(arrays: dict, hyperparameters: dict) -> XQDAModel:
    from reidcli.errors import FittedModelError
    missing = [k for k in ("proj", "metric") if k not in arrays]
    if missing:
        raise FittedModelError(f"xqda trial lacks {', '.join(missing)}", "re-fit the model")
    return XQDAModel(arrays["proj"], arrays["metric"], arrays.get("mean"),
                     hyperparameters.get("normalize", "center-l2"))


def _register() -> None:
    from reidcli import fitted
    fitted.register_method("xqda", _factory)


_register()
