"""LFDA and kernel LFDA (Sugiyama 2007; Pedagadi et al. 2013; kernel form of Xiong et al.
ECCV 2014 [8]) as docs/methods/lfda.md describes them.

With F the "feature" matrix — X [N, D] for the primal linear LFDA, K [N, N] for kernel LFDA —
and kernel-space squared distances d²_ab (K_aa + K_bb − 2K_ab, or ‖x_a − x_b‖²):

* local-scaling affinity A_ab = exp(−d²_ab / (σ_a σ_b)), σ_a = distance from a to its
  ``knn``-th nearest neighbour over **all** rows (6, self excluded), A_aa = 0;
* within weights W^w_ab = A_ab / n_c if y_a = y_b = c, else 0;
  between weights W^b_ab = A_ab (1/N − 1/n_c) if y_a = y_b = c, else 1/N;
* Laplacians E = diag(rowsum W) − W; S_w = Fᵀ E_w F, S_b = Fᵀ E_b F (K E K for kernels);
* S_w ← (1 − β) S_w + β tr(S_w)/m · I (m = size of S, β = 0.01);
* the top-``dim`` generalized eigenvectors of S_b v = λ S_w v, unscaled (scipy's
  S_w-normalised vectors, vᵀ S_w v = 1), each with its largest-magnitude entry positive.

E_b is never formed densely: E_b = (I − 11ᵀ/N) + the class blocks of the Laplacian of
(W^b − 1/N), so S_b = FᵀF − (Fᵀ1)(Fᵀ1)ᵀ/N + Σ_c F_cᵀ E_c F_c.

``lfda`` (LFDA-L): the primal D × D problem, or (``solver="dual"``, the ``auto`` choice when
D > N) kernel LFDA with the linear kernel; either way the model is ``W`` [D, d] (x ↦ xW; for the
dual W = Xᵀ Aᵀ). The two differ only in the regulariser's identity (in x- or in a-space).
``klfda``: arrays ``A`` [d, N] (rows = eigenvectors), ``support`` [N, D] and the kernel
(:mod:`reidcli.metric.kernels`); a linear kernel is collapsed to ``W``.
Camera ids are not used.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from reidcli.errors import UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.metric.kernels import (BLOCK_ELEMENTS, GAMMA_RULES, KERNEL_PARAMETER_HELP, KERNELS,
                                    Kernel, KernelProjection, check_features, check_labels,
                                    kernel_arrays, linear_from_dual, projection_model,
                                    resolve_kernel)
from reidcli.metric.constraints import COUNT, DEVICE, DIM, SEED, check_device, check_dim
from reidcli.params import Interval, Options
from reidcli.progress import track
from reidcli.registry import register

SOLVERS = ("auto", "primal", "dual")
#: constraints shared by LFDA and kernel LFDA (β = the S_w regulariser)
_COMMON_CONSTRAINTS = {"dim": [DIM], "beta": [Interval(float, 0, 1)],
                       "knn": [COUNT]}
_COMMON_HELP = {"dim": "Output dimension d.",
                "beta": "LFDA's β: regulariser of S_w, (1 − β) S_w + β tr(S_w)/m I.",
                "knn": "Neighbour whose distance sets the local scale σ."}


# -- affinity and scatter matrices -------------------------------------------------------------
def _gram_d2(K: np.ndarray, rows: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
    diag = np.diagonal(K)
    cols_sel = slice(None) if cols is None else cols
    sub = K[rows][:, cols_sel]
    return np.maximum(diag[rows][:, None] + diag[cols_sel][None, :] - 2.0 * sub, 0.0)


def _feature_d2(x: np.ndarray, rows: np.ndarray, cols: np.ndarray | None = None,
                norms: np.ndarray | None = None) -> np.ndarray:
    norms = (x * x).sum(1) if norms is None else norms
    cols_sel = slice(None) if cols is None else cols
    d2 = norms[rows][:, None] + norms[cols_sel][None, :] - 2.0 * (x[rows] @ x[cols_sel].T)
    return np.maximum(d2, 0.0)


def local_scales(d2_rows, n: int, knn: int) -> np.ndarray:
    """σ_a = sqrt of the ``knn``-th smallest d²_ab over b ≠ a (the (knn+1)-th including a
    itself, as [8]'s sort); ``d2_rows(rows) -> [len(rows), n]``. float64 [n]."""
    kth = min(knn, n - 1)
    step = max(1, BLOCK_ELEMENTS // max(n, 1))
    sigma = np.empty(n)
    starts = range(0, n, step)
    for s in track(starts, description="lfda local scales", unit="blocks",
                   enabled=None if len(starts) > 1 else False, inner=True):
        rows = np.arange(s, min(n, s + step))
        block = d2_rows(rows)
        block[np.arange(len(rows)), rows] = 0.0              # self distance exactly 0
        sigma[rows] = np.sqrt(np.partition(block, kth, axis=1)[:, kth])
    return sigma


def lfda_scatters(F: np.ndarray, pids, d2_block, sigma: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(S_b, S_w) [m, m] = (Fᵀ E_b F, Fᵀ E_w F) for F [N, m] (X or K), pids [N],
    ``d2_block(rows) -> [len(rows), len(rows)]`` squared distances within a class, σ [N]."""
    import scipy.sparse  # here, not at the top: `reid train --help` need not load it
    n = len(F)
    _, inverse = np.unique(np.asarray(pids), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    tiny = np.finfo(np.float64).tiny
    rows_w, cols_w, vals_w, vals_b = [], [], [], []
    for members in track(np.split(order, bounds), description="lfda scatters", unit="ids",
                         inner=True):
        nc = len(members)
        if nc < 2:
            continue
        scale = np.maximum(np.outer(sigma[members], sigma[members]), tiny)
        aff = np.exp(-d2_block(members) / scale)           # A_ab = exp(−d²/(σ_a σ_b))
        np.fill_diagonal(aff, 0.0)                          # A_aa = 0
        ww = aff / nc                                       # W^w (same class)
        wb = aff * (1.0 / n - 1.0 / nc) - 1.0 / n           # W^b − 1/N (same class)
        np.fill_diagonal(wb, 0.0)
        lw = np.diag(ww.sum(1)) - ww                        # E = diag(rowsum) − W
        lb = np.diag(wb.sum(1)) - wb
        r, c = np.meshgrid(members, members, indexing="ij")
        rows_w.append(r.ravel())
        cols_w.append(c.ravel())
        vals_w.append(lw.ravel())
        vals_b.append(lb.ravel())
    if not rows_w:
        raise UsageError("LFDA: no two training rows share a person id",
                         "train on persons with at least two images")
    r, c = np.concatenate(rows_w), np.concatenate(cols_w)
    e_w = scipy.sparse.csr_matrix((np.concatenate(vals_w), (r, c)), shape=(n, n))
    e_b = scipy.sparse.csr_matrix((np.concatenate(vals_b), (r, c)), shape=(n, n))
    s_w = F.T @ (e_w @ F)                                               # Eq. 8
    total = F.sum(0)
    s_b = F.T @ F - np.outer(total, total) / n + F.T @ (e_b @ F)       # Eq. 9
    return 0.5 * (s_b + s_b.T), 0.5 * (s_w + s_w.T)


def regularise(s_w: np.ndarray, beta: float) -> np.ndarray:
    """S_w ← (1 − β) S_w + β tr(S_w)/m · I."""
    m = len(s_w)
    return (1.0 - beta) * s_w + beta * np.trace(s_w) / m * np.eye(m)


def top_generalized_eigenvectors(s_b: np.ndarray, s_w: np.ndarray, dim: int
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """(λ [dim] descending, V [m, dim]) of S_b v = λ S_w v (S_w positive definite), each
    column's largest-magnitude entry made positive."""
    m = len(s_b)
    dim = min(dim, m)
    try:                              # S_w = L Lᵀ, C = L⁻¹ S_b L⁻ᵀ, C y = λ y, v = L⁻ᵀ y
        low = scipy.linalg.cholesky(s_w, lower=True)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError) as exc:
        raise UsageError(f"LFDA: the regularised within-class scatter is not positive definite "
                         f"({exc})", "use a larger beta") from None
    half = scipy.linalg.solve_triangular(low, s_b, lower=True)
    c = scipy.linalg.solve_triangular(low, half.T, lower=True)
    values, y = scipy.linalg.eigh(0.5 * (c + c.T), subset_by_index=[m - dim, m - 1])
    vectors = scipy.linalg.solve_triangular(low.T, y, lower=False)
    values, vectors = values[::-1].copy(), vectors[:, ::-1].copy()
    sign = np.sign(vectors[np.abs(vectors).argmax(0), np.arange(dim)])
    vectors *= np.where(sign == 0, 1.0, sign)[None, :]
    return values, vectors


def _check_training_set(x, pids, camids, what):
    x = check_features(x, f"{what} training features", min_rows=2)
    pids, _ = check_labels(len(x), pids, camids, f"{what} training set")
    if len(np.unique(pids)) < 2:
        raise UsageError(f"{what}: the training rows hold {len(np.unique(pids))} person(s)",
                         "train on at least two persons")
    return x, pids


def _solve(F, pids, d2_rows, d2_block, dim, beta, knn):
    sigma = local_scales(d2_rows, len(F), knn)
    s_b, s_w = lfda_scatters(F, pids, d2_block, sigma)
    return top_generalized_eigenvectors(s_b, regularise(s_w, beta), dim)


def _kernel_solve(K, pids, dim, beta, knn):
    """Kernel LFDA on K [N, N]: (λ [d], A [d, N])."""
    values, vectors = _solve(K, pids, lambda rows: _gram_d2(K, rows),
                             lambda rows: _gram_d2(K, rows, rows), dim, beta, knn)
    return values, vectors.T


def _check_kernel_n(n: int, max_kernel_n: int, what: str) -> None:
    if n > max_kernel_n:
        raise UsageError(f"{what}: {n} training rows exceed max_kernel_n={max_kernel_n} (the "
                         f"kernel matrix would need {n * n * 8 / 2**30:.1f} GiB)",
                         "train on fewer rows, or raise max_kernel_n")


# -- estimators -------------------------------------------------------------------------------
@register("lfda", stage="train", paper="Pedagadi et al., CVPR 2013 (Sugiyama 2007)",
          summary="LFDA-L: local Fisher discriminant analysis, linear.",
          hidden=["knn", "solver"])
class LFDA(Estimator):
    """Linear LFDA (LFDA-L).

    ``LFDA(dim=40, beta=0.01, knn=6, solver="auto").fit(X [N, D], pids [N])`` sets
    ``projection_`` W [D, d], ``eigenvalues_`` [d] (descending) and ``solver_`` (the one used:
    ``primal`` when D ≤ N, else ``dual``). ``transform(X [n, D]) -> [n, d]`` = X W.
    Fitted arrays: ``W`` [D, d], ``eigenvalues`` [d].
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS, "solver": [Options(SOLVERS)]}
    _parameter_help = {**_COMMON_HELP, "solver": "primal (D × D) | dual (N × N) | auto."}

    _quick_params = {"dim": 8}

    def __init__(self, dim: int = 40, beta: float = 0.01, knn: int = 6, solver: str = "auto"):
        store_params(self, locals())

    def fit(self, X, pids, camids=None) -> "LFDA":
        p = self._validated_params()
        x, pids = _check_training_set(X, pids, camids, "LFDA")
        dim, beta, knn, solver = p["dim"], p["beta"], p["knn"], p["solver"]
        check_dim("LFDA", dim, x.shape[1], "the input features")
        if solver == "auto":
            solver = "primal" if x.shape[1] <= len(x) else "dual"
        if solver == "primal":
            norms = (x * x).sum(1)
            values, w = _solve(x, pids, lambda rows: _feature_d2(x, rows, None, norms),
                               lambda rows: _feature_d2(x, rows, rows, norms), dim, beta, knn)
        else:
            values, a = _kernel_solve(x @ x.T, pids, dim, beta, knn)
            w = linear_from_dual(a, x)
        self.projection_, self.eigenvalues_, self.solver_ = w, values, solver
        self.n_features_in_ = x.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        self._check_fitted("projection_")
        x = check_features(X, "LFDA input features")
        if x.shape[1] != self.n_features_in_:
            raise UsageError(f"LFDA was fitted on {self.n_features_in_}-dimensional features, got "
                             f"{x.shape[1]}", "pass features of the fitted dimension")
        return x @ self.projection_

    def fitted_arrays(self) -> dict:
        self._check_fitted("projection_")
        return {"W": self.projection_, "eigenvalues": self.eigenvalues_}

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters):
        return projection_model(arrays, "lfda")


@register("klfda", stage="train", paper="Xiong et al., ECCV 2014",
          summary="Kernel LFDA (χ²-RBF kernel by default).",
          hidden=["knn", "gamma", "degree", "coef0", "max_kernel_n", "device"])
class KernelLFDA(Estimator):
    """Kernel LFDA (kLFDA).

    ``KernelLFDA(dim=40, beta=0.01, knn=6, kernel="chi2rbf", gamma="auto", degree=3,
    coef0=0.0, max_kernel_n=20000, device="cpu", seed=0).fit(X [N, D], pids [N])`` sets
    ``A_`` [d, N], ``support_`` [N, D] (the training rows), ``kernel_`` (resolved
    :class:`~reidcli.metric.kernels.Kernel`) and ``eigenvalues_`` [d].
    ``transform(X [n, D]) -> [n, d]`` = A k(support, x), in row blocks. Fitted arrays: ``A``,
    ``support``, the kernel parameters and ``eigenvalues`` (``W`` for the linear kernel).
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS, "kernel": [Options(KERNELS)],
                              "gamma": [Options(GAMMA_RULES), Interval(float, 0, None, "neither")],
                              "degree": [Interval(float, 1, None)],
                              "coef0": [Interval(float)],
                              "max_kernel_n": [COUNT], "device": [DEVICE],
                              "seed": [SEED]}
    _parameter_help = {**_COMMON_HELP, "kernel": "Kernel: " + " | ".join(KERNELS) + ".",
                       **KERNEL_PARAMETER_HELP,
                       "device": "torch device of the kernel matrices.",
                       "seed": "Seed of the pairs behind gamma=auto."}

    _quick_params = {"dim": 8, "kernel": "rbf"}

    def __init__(self, dim: int = 40, beta: float = 0.01, knn: int = 6,
                 kernel: str = "chi2rbf", gamma="auto", degree: float = 3, coef0: float = 0.0,
                 max_kernel_n: int = 20000, device: str = "cpu", seed: int = 0):
        store_params(self, locals())

    def fit(self, X, pids, camids=None) -> "KernelLFDA":
        p = self._validated_params()
        x, pids = _check_training_set(X, pids, camids, "kernel LFDA")
        _check_kernel_n(len(x), p["max_kernel_n"], "kernel LFDA")
        p["device"] = check_device("kernel LFDA", p["device"])
        kernel = resolve_kernel(x, p["kernel"], p["gamma"], p["degree"], p["coef0"], p["seed"])
        check_dim("kernel LFDA", p["dim"], len(x),
                  "the kernel space (one dimension per training image)")
        K = kernel.matrix(x, device=p["device"])
        values, a = _kernel_solve(0.5 * (K + K.T), pids, p["dim"], p["beta"], p["knn"])
        self.A_, self.support_, self.kernel_, self.eigenvalues_ = a, x, kernel, values
        self.n_features_in_ = x.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        self._check_fitted("A_")
        return KernelProjection(self.A_, self.support_, self.kernel_, self.device).transform(X)

    def fitted_arrays(self) -> dict:
        """``A`` + ``support`` + kernel parameters; ``W`` [D, d] for the linear kernel."""
        self._check_fitted("A_")
        if self.kernel_.name == "linear":
            return {"W": linear_from_dual(self.A_, self.support_, self.kernel_.scale),
                    "eigenvalues": self.eigenvalues_}
        return {**kernel_arrays(self.A_, self.support_, self.kernel_),
                "eigenvalues": self.eigenvalues_}

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters):
        return projection_model(arrays, "klfda")


__all__ = ["LFDA", "KernelLFDA", "Kernel", "lfda_scatters", "local_scales", "regularise",
           "top_generalized_eigenvectors"]
