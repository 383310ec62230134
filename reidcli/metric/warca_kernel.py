"""WARCA's input side: row preprocessing, kernel values and the bandwidth γ.

The kernel matrices are :mod:`reidcli.metric.kernels`' (``chi2_matrix``,
``sq_euclidean_matrix``; ``Kernel`` holds the resolved parameters). What is WARCA's own:

* kernel values are computed in the dtype of the given tensors (training and evaluation run in
  float32 by default, while ``Kernel.tensor`` works in float64), reusing the γ-free base
  distances when γ was resolved on the same rows;
* ``gamma="auto"`` is 1 / median base distance over WARCA's own draw of row pairs
  (:func:`distinct_row_pairs`, seeded ``[seed, 7]``), which differs from
  ``kernels.auto_gamma``'s draw; keeping it keeps fitted models reproducible.

The kernelised embedding is z(x) = A κ(x) with κ(x) = [k(x_1, x), …, k(x_N, x)] over the stored
training rows (Eqs. 15–17); see ``docs/methods/warca.md`` for the kernel choices.
"""
from __future__ import annotations

import numpy as np

from reidcli import numeric
from reidcli.errors import UsageError
from reidcli.metric import kernels
from reidcli.metric.kernels import Kernel, chi2_matrix, sq_euclidean_matrix

#: ``none`` = the primal W; the others are kernels.KERNELS
KERNELS = ("none", *kernels.KERNELS)
NORMALIZE = ("none", "l2")
#: row pairs behind ``gamma="auto"``
MEDIAN_PAIRS = 100_000


def preprocess(x, normalize: str) -> np.ndarray:
    """Rows as WARCA sees them, at training and at test time alike: ``none`` leaves x [n, D]
    as is, ``l2`` scales each row to unit L2 norm in float64 (zero rows stay zero)."""
    x = np.asarray(x)
    if normalize == "l2":
        x = numeric.l2_normalize_rows(np.asarray(x, dtype=np.float64))
    return x


def base_distances(a, b, kernel: str):
    """The distance that γ multiplies, a [n, D] × b [m, D] torch → [n, m]: χ²(a_p, b_q) =
    Σ_d (a−b)²/(a+b) without ½ (``chi2rbf``) or ‖a_p − b_q‖² (``rbf``)."""
    if kernel == "chi2rbf":
        return chi2_matrix(a, b, additive=False)
    return sq_euclidean_matrix(a, b)


def kernel_values(kernel: Kernel, a, b, base=None):
    """k(a_p, b_q) for a [n, D], b [m, D] torch tensors → [n, m] in their dtype.

    chi2rbf: exp(−γχ²); chi2: Σ 2ab/(a+b); rbf: exp(−γ‖a−b‖²); poly: (γ aᵀb + coef0)^degree;
    linear: aᵀb. ``base`` = :func:`base_distances` of (a, b) when already computed.
    """
    import torch
    name = kernel.name
    if name in ("chi2rbf", "rbf"):
        base = base_distances(a, b, name) if base is None else base
        return torch.exp(-kernel.gamma * base)
    if name == "chi2":
        return chi2_matrix(a, b, additive=True)
    if name == "linear":
        return a @ b.T
    if name == "poly":
        return (kernel.gamma * (a @ b.T) + kernel.coef0) ** kernel.degree
    raise UsageError(f"warca kernel {name!r} has no kernel matrix",
                     f"use one of {', '.join(KERNELS[1:])}")


def distinct_row_pairs(n: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs (a [M], b [M]) with a ≠ b: all n(n−1)/2 pairs a < b when there are at most
    ``count``, else ``count`` uniform draws (with replacement) from ``default_rng([seed, 7])``."""
    total = n * (n - 1) // 2
    if total <= count:
        a, b = np.triu_indices(n, 1)
        return a, b
    rng = np.random.default_rng([seed, 7])
    a = rng.integers(0, n, count)
    b = rng.integers(0, n - 1, count)
    b = b + (b >= a)
    return a, b


def training_kernel(x, name: str, gamma, degree: int, coef0: float, seed: int):
    """(K [N, N], Kernel) on the training rows x [N, D] (torch; K in x's dtype, symmetrised).

    ``gamma="inv_dim"``: 1/D; ``"auto"``: 1/D for ``poly``, for ``chi2rbf`` / ``rbf``
    1 / median base distance over :func:`distinct_row_pairs` (≤ :data:`MEDIAN_PAIRS`).
    Kernels without γ keep γ = 1.
    """
    import torch
    base = base_distances(x, x, name) if name in ("chi2rbf", "rbf") else None
    if name not in kernels.GAMMA_KERNELS:
        gamma = 1.0
    elif gamma == "inv_dim" or (gamma == "auto" and name == "poly"):
        gamma = 1.0 / x.shape[1]             # inv_dim: 1/D, the WARCA authors' C++ default
    elif gamma == "auto":
        a, b = distinct_row_pairs(len(x), MEDIAN_PAIRS, seed)
        median = float(torch.quantile(base[a, b], 0.5)) if len(a) else 0.0
        if not median > 0:
            raise UsageError(f"warca kernel {name}: the median pairwise distance is 0, "
                             "γ auto is undefined", "give gamma=FLOAT or check the features")
        gamma = 1.0 / median
    kernel = Kernel(name, float(gamma), degree, coef0)
    K = kernel_values(kernel, x, x, base)
    return 0.5 * (K + K.T), kernel
