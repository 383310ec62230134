"""XQDA — Cross-view Quadratic Discriminant Analysis (Liao, Hu, Zhu, Li, CVPR 2015) as
docs/methods/xqda.md describes it; shared by C-DPCF/DPCF/AvgP (one XQDA per layer and map) and
``reid train xqda``.

Σ_I, Σ_E are the same-/different-person **cross-camera** pair covariances of the rows
(:func:`~reidcli.metric.pair_covariances.cross_camera_pair_covariances` with E = 1), computed
from class sums, never by enumerating pairs. Defaults follow the authors' public release:
λ = 0.001 added to Σ_I only, subspace = left singular vectors of Σ_I′⁻¹Σ_E (``solver="svd"``;
``"eigh"`` solves the paper's generalized eigenproblem), rank r = #values > 1 (at least 1).

Fitted-model integration: :func:`xqda_arrays` / :func:`fit_xqda_arrays` give the arrays of one
trial (``proj`` float32 [d, r], ``metric`` float64 [r, r], optional ``mean`` [d]);
:class:`XQDAModel` is what ``reid eval`` gets back from ``reidcli.fitted.load`` for
``method="xqda"``.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from reidcli.cameras import camera_index
from reidcli.errors import FittedModelError, UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.fitted import TrialModel
from reidcli.metric.constraints import COUNT, DEVICE, check_device, check_dim
from reidcli.metric.pair_covariances import cross_camera_pair_covariances
from reidcli.naming import param
from reidcli.numeric import l2_normalize_rows
from reidcli.params import NONE, Interval, Options
from reidcli.registry import register

SOLVERS = ("svd", "eigh")
#: feature preprocessing before XQDA: train-mean removal + L2 (C-DPCF paper §III-C), L2, nothing
PREPROCESSING = ("center-l2", "l2", "none")
#: Gram eigenvalues ≤ SPAN_TOL·max are dropped by the span reduction (§4.1)
SPAN_TOL = 1e-10


def _torch(device):
    import torch
    return torch, torch.device(device)


def _span_eig(x: np.ndarray, tol: float, device=None) -> tuple[np.ndarray, np.ndarray]:
    """Kept eigenpairs (Λ_k [N′], U_k [N, N′]) of the Gram x x^T (eigenvalues > tol·max)."""
    if device is None:
        gram = x @ x.T
        values, vectors = scipy.linalg.eigh(0.5 * (gram + gram.T))
    else:
        torch, dev = _torch(device)
        xt = torch.as_tensor(x, dtype=torch.float64, device=dev)
        gram = xt @ xt.T
        values, vectors = torch.linalg.eigh(0.5 * (gram + gram.T))
        values, vectors = values.cpu().numpy(), vectors.cpu().numpy()
    top = float(values.max()) if len(values) else 0.0
    keep = values > tol * top
    if top <= 0 or not keep.any():
        raise UsageError("XQDA training features are all zero", "check the features")
    return values[keep], vectors[:, keep]


def _subspace(sigma_i: np.ndarray, sigma_e: np.ndarray, solver: str,
              device=None) -> tuple[np.ndarray, np.ndarray]:
    """(values descending [m], vectors [m, m]) of the XQDA subspace problem (§4.4)."""
    if device is None:
        if solver == "svd":                      # release: left singular vectors of Σ_I′⁻¹ Σ_E
            u, values, _ = scipy.linalg.svd(np.linalg.solve(sigma_i, sigma_e))
            return values, u
        values, u = scipy.linalg.eigh(sigma_e, sigma_i)    # paper: Σ_E v = λ Σ_I′ v
        return values[::-1], u[:, ::-1]
    torch, dev = _torch(device)
    si = torch.as_tensor(sigma_i, dtype=torch.float64, device=dev)
    se = torch.as_tensor(sigma_e, dtype=torch.float64, device=dev)
    if solver == "svd":
        u, values, _ = torch.linalg.svd(torch.linalg.solve(si, se))
        return values.cpu().numpy(), u.cpu().numpy()
    low, info = torch.linalg.cholesky_ex(si)   # Σ_I′ = L L^T; C = L⁻¹ Σ_E L⁻ᵀ; v = L⁻ᵀ y
    if int(info) != 0:
        raise np.linalg.LinAlgError("Σ_I′ is not positive definite")
    half = torch.linalg.solve_triangular(low, se, upper=False)
    c = torch.linalg.solve_triangular(low, half.T, upper=False)
    values, y = torch.linalg.eigh(0.5 * (c + c.T))
    v = torch.linalg.solve_triangular(low.T, y, upper=True)
    return values.flip(0).cpu().numpy(), v.flip(1).cpu().numpy()


def _times(a: np.ndarray, b: np.ndarray, device=None) -> np.ndarray:
    if device is None:
        return a @ b
    torch, dev = _torch(device)
    return (torch.as_tensor(a, dtype=torch.float64, device=dev)
            @ torch.as_tensor(b, dtype=torch.float64, device=dev)).cpu().numpy()


def quadratic_distances(uq: np.ndarray, ug: np.ndarray, metric: np.ndarray) -> np.ndarray:
    """(u_q − u_g)^T M (u_q − u_g) = a_q + a_g − 2 (u_q M)·u_g for all pairs.

    uq [q, r], ug [g, r], metric M [r, r] symmetric → [q, g] float64 (one GEMM).
    """
    qm = uq @ metric
    aq = np.einsum("ij,ij->i", qm, uq)
    ag = np.einsum("ij,ij->i", ug @ metric, ug)
    return aq[:, None] + ag[None, :] - 2.0 * (qm @ ug.T)


def _check_labels(n: int, pids, camids, what: str) -> tuple[np.ndarray, np.ndarray]:
    pids, camids = np.asarray(pids), np.asarray(camids)
    if pids.shape != (n,) or camids.shape != (n,):
        raise UsageError(f"{what}: {n} feature rows but pids of shape {pids.shape} and camids "
                         f"of shape {camids.shape}", "pass one person id and one camera id per row")
    num_cameras = camera_index(camids)[1]      # camids: codes of (domain, camid) cameras
    if num_cameras < 2:
        raise UsageError(f"{what} has images of {num_cameras} camera(s); XQDA "
                         "learns from cross-camera pairs",
                         "train on images of at least two cameras")
    return pids, camids


@register("xqda", stage="train", paper="Liao et al., CVPR 2015",
          summary="XQDA: cross-view quadratic discriminant analysis.",
          hidden=["device"])
class XQDA(Estimator):
    """XQDA metric learner.

    ``XQDA(lam=0.001, solver="svd" | "eigh", max_dims=None, normalize="center-l2",
    device=None).fit(X [N, d], pids [N], camids [N])`` preprocesses the rows (``normalize``:
    ``center-l2`` removes the training mean ``mean_`` and L2-normalises, ``l2`` only
    normalises, ``none`` uses the rows as given) and sets

    * ``projection_`` W float64 [d, r] (= B V after the span reduction),
    * ``metric_`` M float64 [r, r] (symmetrised),
    * ``eigenvalues_`` float64 — all values the rank is chosen from, descending (singular
      values of Σ_I′⁻¹Σ_E for ``svd``, generalized eigenvalues for ``eigh``),
    * ``rank_`` r = #values > 1, at least 1, at most ``max_dims``,
    * ``mean_`` [d] (``center-l2``) or None.

    ``distance(Xq [q, d], Xg [g, d]) -> [q, g]`` is (W^T x̃ − W^T z̃)^T M (W^T x̃ − W^T z̃) of the
    preprocessed rows. ``device`` (e.g. ``"cuda"``) runs the Gram, covariances and the
    eigen/SVD step in torch float64 there. Fitted arrays: ``proj`` float32 [d, r], ``metric``
    float64 [r, r], ``mean`` [d] for ``center-l2``.
    """

    _parameter_constraints = {"lam": [Interval(float, 0, None)], "solver": [Options(SOLVERS)],
                              "max_dims": [COUNT, NONE],
                              "normalize": [Options(PREPROCESSING)], "device": [DEVICE, NONE]}
    _parameter_help = {"lam": "XQDA's λ: regulariser added to Σ_I (Σ_I′ = Σ_I + λI).",
                       "solver": "svd (public release) | eigh (the paper's generalized "
                                 "eigenproblem).",
                       "max_dims": "Cap on the subspace rank (default: #eigenvalues > 1).",
                       "normalize": "Row preprocessing: center-l2 | l2 | none.",
                       "device": "torch device for the decompositions (default: numpy)."}

    def __init__(self, lam: float = 0.001, solver: str = "svd", max_dims: int | None = None,
                 normalize: str = "center-l2", device: str | None = None):
        store_params(self, locals())

    def fit(self, X: np.ndarray, pids: np.ndarray, camids: np.ndarray) -> "XQDA":
        """Learn W and M from X [N, d] float, pids [N] int, camids [N] int. Returns self."""
        p = self._validated_params()
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
            raise UsageError(f"XQDA needs training features of shape [N ≥ 2, d ≥ 1], got "
                             f"{x.shape}", "pass one feature row per image")
        pids, camids = _check_labels(len(x), pids, camids, "XQDA training set")
        if not np.isfinite(x).all():
            raise UsageError("XQDA training features hold NaN or Inf", "fix the features")
        check_dim("XQDA", p["max_dims"], x.shape[1], "the input features", name="max_dims")
        p["device"] = check_device("XQDA", p["device"])
        self.normalize_ = p["normalize"]
        self.mean_ = x.mean(0) if self.normalize_ == "center-l2" else None
        x = preprocess(x, self.normalize_, self.mean_)
        lam, max_dims, solver, device = p["lam"], p["max_dims"], p["solver"], p["device"]
        n, d = x.shape
        back = None
        if d > n:                                # §4.1 span reduction, B = X^T U Λ^{-1/2}
            lam_k, u_k = _span_eig(x, SPAN_TOL, device)
            xr = u_k * np.sqrt(lam_k)[None, :]                            # X_r = X B = U Λ^{1/2}
            back = u_k / np.sqrt(lam_k)[None, :]                          # B = X^T U Λ^{-1/2}
        else:
            xr = x
        cov = cross_camera_pair_covariances(xr[:, None, :], pids, camids, device=device,
                                            context="XQDA training set")  # §4.2 Σ_I, Σ_E
        dim = xr.shape[1]
        sigma_i = cov.sigma_same + lam * np.eye(dim)                 # §4.3 Σ_I′ = Σ_I + λI
        sigma_e = cov.sigma_diff
        try:                       # §4.4 svd(Σ_I′⁻¹ Σ_E) | eigh(Σ_E, Σ_I′), descending
            values, u = _subspace(sigma_i, sigma_e, solver, device)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError) as exc:
            raise UsageError(f"XQDA: the regularised same-person covariance Σ_I + λI is "
                             f"singular (λ = {lam:g}; {exc})",
                             "use lam > 0 (default 0.001)") from None
        rank = int((values > 1).sum())                                    # §4.5 r = #values > 1
        if rank == 0:
            warnings.warn(f"XQDA: no {'singular value' if solver == 'svd' else 'eigenvalue'}"
                          f" exceeds 1 (largest {values[0]:.4g}), so r = 1 dimension is kept and"
                          f" the metric is not discriminative — lower {param('lam', f'{lam:g}')}"
                          " or check that the training features differ between identities",
                          UserWarning, stacklevel=2)
            rank = 1
        if max_dims is not None:
            rank = min(rank, max_dims)
        v = u[:, :rank]
        try:                                     # §4.6 M = (V^T Σ_I′ V)⁻¹ − (V^T Σ_E V)⁻¹
            metric = np.linalg.inv(v.T @ sigma_i @ v) - np.linalg.inv(v.T @ sigma_e @ v)
        except np.linalg.LinAlgError:
            raise UsageError("XQDA: the different-person covariance is singular on the kept "
                             "subspace", "check that the training features vary across "
                             "persons") from None
        self.metric_ = 0.5 * (metric + metric.T)
        w = v if back is None else _times(x.T, back @ v, device)      # W = B V  [d, r]
        self.projection_ = np.ascontiguousarray(w)
        self.eigenvalues_ = np.asarray(values, dtype=np.float64).copy()
        self.rank_ = rank
        self.n_features_in_ = d
        return self

    def _fitted(self) -> None:
        self._check_fitted("projection_")

    def _rows(self, x: np.ndarray, what: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features_in_:
            raise UsageError(f"XQDA {what}: expected features [n, {self.n_features_in_}], got "
                             f"shape {x.shape}", "pass features of the dimension fitted on")
        return x

    def transform(self, X: np.ndarray) -> np.ndarray:
        """U = X̃ W of the preprocessed rows: [n, d] → [n, r] float64."""
        self._fitted()
        return preprocess(self._rows(X, "transform"), self.normalize_, self.mean_) \
            @ self.projection_

    def fitted_arrays(self) -> dict:
        """``proj`` float32 [d, r], ``metric`` float64 [r, r], ``mean`` [d] (center-l2)."""
        self._fitted()
        return xqda_arrays(self, self.mean_)

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters) -> "XQDAModel":
        missing = [k for k in ("proj", "metric") if k not in arrays]
        if missing:
            raise FittedModelError(f"xqda trial lacks {', '.join(missing)}", "re-fit the model")
        mode = hyperparameters.get("normalize")
        if mode is None:                   # no record: centre + L2 exactly when a mean is stored
            mode = "center-l2" if "mean" in arrays else "none"
        if mode not in PREPROCESSING and not isinstance(mode, bool):
            raise FittedModelError(f"xqda: unknown normalize={mode!r} in the hyperparameters",
                                   "re-fit the model")
        mean = arrays.get("mean") if mode in ("center-l2", True) else None
        return XQDAModel(arrays["proj"], arrays["metric"], mean, mode)

    def pairwise_terms(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For projected rows U [n, r]: (U M [n, r], a [n] with a_i = u_i^T M u_i), the two
        factors of d(x, z) = a_x + a_z − 2 (u_x M)·u_z (§4.7)."""
        self._fitted()
        u = np.asarray(U, dtype=np.float64)
        um = u @ self.metric_
        return um, np.einsum("ij,ij->i", um, u)

    def distance(self, Xq: np.ndarray, Xg: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distances in the learned subspace, [q, d] × [g, d] → [q, g]
        (MahDist, §4.7): a_x + a_z − 2 (W^T x)^T M (W^T z), one GEMM."""
        uq, ug = self.transform(Xq), self.transform(Xg)
        qm, aq = self.pairwise_terms(uq)
        _, ag = self.pairwise_terms(ug)
        return aq[:, None] + ag[None, :] - 2.0 * (qm @ ug.T)


# -- fitted-model integration (``reid train xqda`` → ``reid eval --model``) -----------------
def _mode(normalize, mean) -> str:
    if isinstance(normalize, (bool, np.bool_)):
        return ("center-l2" if mean is not None else "l2") if normalize else "none"
    if normalize not in PREPROCESSING:
        raise UsageError(f"normalize={normalize!r} is unknown",
                         f"choose one of {', '.join(PREPROCESSING)}")
    return str(normalize)


def preprocess(x: np.ndarray, mode: str, mean: np.ndarray | None) -> np.ndarray:
    """The features XQDA sees, x [n, d] → float64 [n, d]: subtract ``mean`` [d] when given,
    then L2-normalise rows for ``center-l2`` and ``l2`` (C-DPCF paper §III-C); ``none`` leaves the
    rows as they are. ``center-l2`` needs a mean."""
    x = np.asarray(x, dtype=np.float64)
    if mode == "center-l2" and mean is None:
        raise UsageError("center-l2 preprocessing needs the training mean",
                         "pass the mean, or use normalize='l2' / 'none'")
    if mean is not None:
        x = x - np.asarray(mean, dtype=np.float64)[None, :]
    if mode in ("center-l2", "l2"):
        x = l2_normalize_rows(x)
    return x


def xqda_arrays(model: XQDA, mean: np.ndarray | None = None) -> dict:
    """Arrays of one fitted trial: ``{"proj": float32 [d, r], "metric": float64 [r, r]}``
    plus ``"mean"`` float64 [d] when ``mean`` is given (train mean for ``center-l2``)."""
    model._fitted()
    arrays = {"proj": model.projection_.astype(np.float32),
              "metric": np.asarray(model.metric_, dtype=np.float64)}
    if mean is not None:
        mean = np.asarray(mean, dtype=np.float64)
        if mean.shape != (model.projection_.shape[0],):
            raise UsageError(f"XQDA mean has shape {mean.shape}, expected "
                             f"({model.projection_.shape[0]},)", "pass the training mean [d]")
        arrays["mean"] = mean
    return arrays


def fit_xqda_arrays(x: np.ndarray, pids: np.ndarray, camids: np.ndarray, *, lam: float = 0.001,
                    solver: str = "svd", max_dims: int | None = None,
                    normalize: str = "center-l2") -> dict:
    """``XQDA(...).fit(x, pids, camids).fitted_arrays()`` (the arrays of one trial)."""
    return XQDA(lam=lam, solver=solver, max_dims=max_dims,
                normalize=normalize).fit(x, pids, camids).fitted_arrays()


class XQDAModel(TrialModel):
    """A fitted XQDA trial for ``reid eval``.

    ``XQDAModel(proj [d, r], metric [r, r], mean=None [d], normalize="center-l2")``;
    ``normalize`` ∈ ``center-l2`` | ``l2`` | ``none`` (or a bool: True = L2 after centring
    by ``mean`` when given). ``distance(query_block [q, d], gallery_block [g, d]) -> [q, g]``
    float64: centre by ``mean`` if given, L2-normalise rows if ``normalize`` says so, project
    and take the XQDA distance.
    """

    metric = "xqda"

    def __init__(self, proj: np.ndarray, metric: np.ndarray, mean: np.ndarray | None = None,
                 normalize: str | bool = "center-l2"):
        self.proj = np.asarray(proj, dtype=np.float64)
        self.M = np.asarray(metric, dtype=np.float64)
        self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.normalize = _mode(normalize, self.mean)
        if self.proj.ndim != 2 or self.M.shape != (self.proj.shape[1],) * 2:
            raise FittedModelError(f"xqda: proj has shape {self.proj.shape} and metric "
                                   f"{self.M.shape}; expected [d, r] and [r, r]",
                                   "re-fit the model")
        if self.mean is not None and self.mean.shape != (self.proj.shape[0],):
            raise FittedModelError(f"xqda: mean has shape {self.mean.shape}, expected "
                                   f"({self.proj.shape[0]},)", "re-fit the model")
        if self.normalize == "center-l2" and self.mean is None:
            raise FittedModelError("xqda: center-l2 preprocessing but no stored mean",
                                   "re-fit the model")

    @property
    def input_dim(self) -> int:  # type: ignore[override]
        return int(self.proj.shape[0])

    def transform(self, features: np.ndarray) -> np.ndarray:
        """u = Wᵀ x̃ of the preprocessed rows: [n, d] → [n, r] float64."""
        x = np.asarray(features)
        if x.ndim != 2 or x.shape[1] != self.input_dim:
            raise FittedModelError(f"xqda expects {self.input_dim}-dimensional features, got "
                                   f"shape {x.shape}",
                                   "evaluate the store feature the model was fit on")
        return preprocess(x, self.normalize, self.mean) @ self.proj

    def embedded_distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        """Projected rows [q, r] × [g, r] → [q, g] float64 XQDA distances (MahDist)."""
        return quadratic_distances(query, gallery, self.M)
