"""PCA projection (docs/methods/pca.md): the WARCA paper's unsupervised reference ("Euclidean /
PCA") and the preprocessing of KISSME.

Fit on the training rows: centre by the mean, keep the top-k principal directions (eigenvectors
of the scatter XcᵀXc, or of the Gram XcXcᵀ when N < D), k = ``dim`` (default D' = 40) or, when
``variance`` is given, the smallest k whose components explain that fraction of the variance.
Each direction's sign is fixed so that its largest-magnitude entry is positive.

``reid train pca`` → arrays ``W`` float64 [D, k], ``mean`` [D], ``explained_variance`` [k];
evaluation embeds x ↦ (x − mean) W and ranks by Euclidean distance (the built-in
``linear-projection`` model).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from reidcli.errors import UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.metric.constraints import DIM, check_dim
from reidcli.metric.kernels import check_features, projection_model
from reidcli.params import NONE, Interval, check_param
from reidcli.registry import register

#: a fraction of the total variance
VARIANCE = Interval(float, 0, 1, "right")


def pca_basis(x, dim: int | None = 40, variance: float | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Principal directions of x [N, D].

    Returns (mean [D], W [D, k], explained variance [k] (eigenvalues of the covariance, with
    N − 1 in the denominator), explained-variance ratio [k]). ``variance`` ∈ (0, 1] picks the
    smallest k reaching that cumulative ratio; otherwise k = min(``dim``, rank).
    """
    x = check_features(x, "PCA training features", min_rows=2)
    variance = check_param("PCA", "variance", variance, VARIANCE, NONE)
    if variance is None:
        dim = check_param("PCA", "dim", dim, DIM)
    n, d = x.shape
    if variance is None:
        check_dim("PCA", dim, d, "the input features")
    mean = x.mean(0)
    xc = x - mean
    if n >= d:                                           # scatter XcᵀXc [D, D]
        values, vectors = scipy.linalg.eigh(xc.T @ xc)
        values, vectors = values[::-1], vectors[:, ::-1]
    else:                                                # Gram XcXcᵀ = U Λ Uᵀ, V = XcᵀU Λ^-½
        values, u = scipy.linalg.eigh(xc @ xc.T)
        values, u = values[::-1], u[:, ::-1]
        pos = values > values[0] * 1e-12 if values[0] > 0 else np.zeros(len(values), bool)
        values, u = values[pos], u[:, pos]
        vectors = (xc.T @ u) / np.sqrt(values)[None, :]
    values = np.maximum(values, 0.0)
    total = values.sum()
    if not total > 0:
        raise UsageError("PCA: the training features do not vary", "check the features")
    rank = int((values > values[0] * 1e-12).sum())
    ratio = values / total
    if variance is not None:
        k = int(np.searchsorted(np.cumsum(ratio), variance - 1e-12) + 1)
        k = min(k, rank)
    else:
        k = min(int(dim), rank)
    w = vectors[:, :k].copy()
    flip = np.sign(w[np.abs(w).argmax(0), np.arange(k)])           # largest entry positive
    w *= np.where(flip == 0, 1.0, flip)[None, :]
    return mean, w, values[:k] / (n - 1), ratio[:k]


@register("pca", stage="train", paper="Pearson 1901; the WARCA paper's unsupervised reference",
          summary="PCA projection (the unsupervised reference).")
class PCA(Estimator):
    """PCA estimator: ``PCA(dim=40, variance=None).fit(X [N, D])`` sets ``mean_`` [D],
    ``projection_`` [D, k], ``explained_variance_`` [k], ``explained_variance_ratio_`` [k];
    ``transform(X [n, D]) -> [n, k]`` = (X − mean) W. Labels are ignored.

    Fitted arrays: ``W`` [D, k], ``mean`` [D], ``explained_variance`` [k] (evaluated by the
    built-in ``linear-projection`` model, Euclidean distances).
    """

    _parameter_constraints = {"dim": [DIM, NONE], "variance": [VARIANCE, NONE]}
    _parameter_help = {"dim": "Output dimension k (ignored when variance is set).",
                       "variance": "Keep the smallest k explaining this fraction of the "
                                   "variance."}

    _quick_params = {"dim": 8}

    def __init__(self, dim: int | None = 40, variance: float | None = None):
        store_params(self, locals())

    def fit(self, X, pids=None, camids=None) -> "PCA":
        p = self._validated_params()
        (self.mean_, self.projection_, self.explained_variance_,
         self.explained_variance_ratio_) = pca_basis(X, p["dim"], p["variance"])
        self.n_features_in_ = self.projection_.shape[0]
        return self

    def transform(self, X) -> np.ndarray:
        self._check_fitted("projection_")
        x = check_features(X, "PCA input features")
        if x.shape[1] != self.n_features_in_:
            raise UsageError(f"PCA was fitted on {self.n_features_in_}-dimensional features, got "
                             f"{x.shape[1]}", "pass features of the fitted dimension")
        return (x - self.mean_) @ self.projection_

    def fit_transform(self, X, pids=None, camids=None) -> np.ndarray:
        return self.fit(X).transform(X)

    def fitted_arrays(self) -> dict:
        self._check_fitted("projection_")
        return {"W": self.projection_, "mean": self.mean_,
                "explained_variance": self.explained_variance_}

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters):
        return projection_model(arrays, "pca")
