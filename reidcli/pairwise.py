"""Feature distances on the CPU in float32, the one formula of ``reid eval``'s GEMM metrics
and of fitted models that compare their transformed rows with a standard metric.

Low in the package (NumPy only): :mod:`reidcli.fitted` and the evaluation engine
(:mod:`reidcli.evaluation.distances`) both use it, so the fitted-model layer never imports the
evaluation package. For rows a, b (float32):

* ``sqeuclidean``: ‖a‖² + ‖b‖² − 2·a·b, clamped at 0;
* ``euclidean``: its square root;
* ``cosine``: 1 − a·b of unit rows (:func:`l2_normalize`).

The −2 is folded into the query rows before the GEMM: scaling by a power of two is exact in
floating point, so (−2a)·b is bit for bit −2(a·b), one pass over the [a, b] block fewer.
"""
from __future__ import annotations

import numpy as np

from reidcli.numeric import NORM_EPS, l2_normalize_rows

METRICS = ("euclidean", "sqeuclidean", "cosine")


def l2_normalize(features: np.ndarray, eps: float = NORM_EPS, inplace: bool = False
                 ) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero). float32 [n, D]
    (:func:`reidcli.numeric.l2_normalize_rows` on float32 rows).

    ``inplace``: scale a float32 C-contiguous ``features`` in place, one block of rows at a
    time (no second copy of the set); otherwise the result is one new array."""
    features = np.asarray(features)
    if not (inplace and features.dtype == np.float32 and features.flags.c_contiguous
            and features.flags.writeable):
        features = np.array(features, dtype=np.float32, order="C", copy=True)
    if features.ndim != 2 or not features.size:
        return features
    return l2_normalize_rows(features, eps, inplace=True)


def squared_norms(features: np.ndarray) -> np.ndarray:
    """‖x‖² of every row of float32 ``features`` [n, D] → float32 [n]."""
    return np.einsum("ij,ij->i", features, features).astype(np.float32)


def finish_distances(d: np.ndarray, metric: str, a_sqnorm: np.ndarray | None,
                     b_sqnorm: np.ndarray | None, scaled: bool = False) -> np.ndarray:
    """Distances [a, b] from the product ``d`` = a·bᵀ (float32, overwritten and returned);
    ``scaled``: ``d`` is already (−2a)·bᵀ (:func:`gemm_distances`)."""
    if metric == "cosine":
        np.subtract(np.float32(1.0), d, out=d)
        return d
    if not scaled:
        d *= np.float32(-2.0)
    d += a_sqnorm[:, None]
    d += b_sqnorm[None, :]
    np.maximum(d, np.float32(0.0), out=d)
    if metric == "euclidean":
        np.sqrt(d, out=d)
    return d


def gemm_distances(a: np.ndarray, b: np.ndarray, metric: str,
                   a_sqnorm: np.ndarray | None = None,
                   b_sqnorm: np.ndarray | None = None,
                   out: np.ndarray | None = None, map_rows=None) -> np.ndarray:
    """Distances [len(a), len(b)] (float32) between prepared float32 rows ``a`` [n, D] and
    ``b`` [m, D] (cosine: unit rows; the euclidean metrics: with their squared norms).

    ``out``: a float32 C-contiguous [n, m] array to write them into and return (a caller
    ranking block after block reuses one buffer instead of faulting in fresh pages for each
    block). ``map_rows(fn, num_rows, size)``: runs ``fn(row_slice)`` over slices of the rows
    (e.g. on threads, :meth:`~reidcli.evaluation.backend.NumpyBackend.map_row_slices`) for
    the element-wise finishing passes. The values are the same bits either way."""
    if out is not None and not (out.shape == (len(a), len(b)) and out.dtype == np.float32
                                and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous float32 array of shape "
                         f"{(len(a), len(b))}")
    scaled = metric != "cosine"
    d = np.matmul(a * np.float32(-2.0) if scaled else a, b.T, out=out)
    if map_rows is None:
        return finish_distances(d, metric, a_sqnorm, b_sqnorm, scaled=scaled)
    map_rows(lambda rows: finish_distances(d[rows], metric, None if a_sqnorm is None
                                           else a_sqnorm[rows], b_sqnorm, scaled=scaled),
             len(d), d.size)
    return d


def pairwise_distances(query: np.ndarray, gallery: np.ndarray, metric: str) -> np.ndarray:
    """Distances [q, g] (float32) between raw feature rows ``query`` [q, D] and ``gallery``
    [g, D]: rows made float32 (cosine: normalised copies), then :func:`gemm_distances`."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    a = np.ascontiguousarray(query, dtype=np.float32)
    b = np.ascontiguousarray(gallery, dtype=np.float32)
    if metric == "cosine":
        return gemm_distances(l2_normalize(a), l2_normalize(b), metric)
    return gemm_distances(a, b, metric, squared_norms(a), squared_norms(b))
