"""Query × gallery distances, computed one block of query rows at a time.

A *metric* turns two prepared point sets into a distance block [a, b] (smaller = more
similar): ``euclidean``, ``sqeuclidean`` and ``cosine`` (1 − cosine similarity) on features
(one GEMM per block, float32, NumPy on the CPU or torch on a GPU), or a fitted model's own
``distance(query_block, gallery_block)``. A :class:`QueryGallery` pairs a metric with the
query and gallery sets and hands out blocks of rows; nothing holds the whole Q×G matrix.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reidcli.evaluation.errors import EvaluationError, EvaluationParameterError
from reidcli.naming import param
from reidcli.params import PRECISION, check_param
from reidcli.pairwise import (METRICS, finish_distances, gemm_distances, l2_normalize,
                              squared_norms)
FEATURE_NORMS = ("auto", "none", "global", "parts")


# -- feature checks and normalisation ----------------------------------------------------------
#: largest squared row norm the float32 distance GEMM can hold: ‖a‖² + ‖b‖² − 2·a·b must stay
#: below float32's maximum (≈3.4e38) for any two rows, so each ‖x‖² ≤ max/4 (‖x‖ ≲ 9.2e18).
#: Larger rows overflow to Inf/NaN and their rankings then depend on row order, so they are
#: rejected rather than silently computed in float64 (normalise them instead: feat_norm).
MAX_SQNORM = float(np.finfo(np.float32).max) / 4


def check_features(features: np.ndarray, what: str, magnitude: bool = True) -> np.ndarray:
    """Return ``features`` as a 2-D float array; EvaluationError on NaN/Inf, on rows too large
    for the float32 distance computation (squared norm > :data:`MAX_SQNORM`, checked in float64
    unless ``magnitude`` is False) or on a bad shape.

    With ``magnitude``, one pass (:func:`_unsafe_rows`) finds the only rows that can fail
    either check; those alone are checked exactly."""
    features = np.asarray(features)
    if features.ndim != 2:
        raise EvaluationError(f"{what} have shape {features.shape}, expected [rows, dim]",
                              "give one feature vector per row")
    if features.dtype.kind != "f":
        features = features.astype(np.float32)
    if magnitude:
        rows = _unsafe_rows(features)
        _check_finite(features[rows], what, rows)
        _check_magnitude(features[rows], what, rows)
        return features
    _check_finite(features, what)
    return features


def _check_finite(features: np.ndarray, what: str, positions: np.ndarray | None = None) -> None:
    """EvaluationError when rows of ``features`` hold NaN or Inf (``positions``: the rows'
    positions in the whole set, for the message; default 0, 1, …)."""
    step = max(1, (1 << 22) // max(features.shape[1], 1))      # bounded scratch
    bad = np.concatenate([~np.isfinite(features[s:s + step]).all(axis=1)
                          for s in range(0, len(features), step)]) if len(features) else \
        np.zeros(0, dtype=bool)
    if bad.any():
        rows = np.flatnonzero(bad) if positions is None else positions[bad]
        raise EvaluationError(f"{what}: {len(rows)} row(s) hold NaN or Inf values (first at "
                              f"position {rows[0]})", "re-extract or fix those features")


def _unsafe_rows(features: np.ndarray) -> np.ndarray:
    """Positions of the rows that may hold NaN/Inf or exceed :data:`MAX_SQNORM`: those whose
    squared norm, summed in the features' own precision (float32: one pass, no copy), is not
    finite or above MAX_SQNORM / 4. Any NaN/Inf makes that sum NaN/Inf, and its relative error
    (≤ D·2⁻²⁴ for D non-negative terms) is far below the factor 4, so every row the exact
    float64 checks would refuse is among them. int64 [k]."""
    if not len(features) or not features.shape[1]:
        return np.zeros(0, dtype=np.int64)
    if features.dtype not in (np.float32, np.float64):
        features = features.astype(np.float32)
    sq = np.einsum("ij,ij->i", features, features)
    return np.flatnonzero(~(sq <= MAX_SQNORM / 4))


def check_magnitude(features: np.ndarray, what: str) -> None:
    """EvaluationError when a row's squared L2 norm (float64) exceeds :data:`MAX_SQNORM`: the
    float32 GEMM distance would overflow (and a float32 cast of the row may already have).
    Only the rows :func:`_unsafe_rows` finds are summed in float64."""
    if not len(features) or not features.shape[1]:
        return
    rows = _unsafe_rows(features)
    _check_magnitude(features[rows], what, rows)


def _check_magnitude(features: np.ndarray, what: str, positions: np.ndarray) -> None:
    """:func:`check_magnitude` of rows ``features`` [k, D] at ``positions`` [k]."""
    if not len(features) or not features.shape[1]:
        return
    step = max(1, (1 << 22) // max(features.shape[1], 1))
    sq = np.concatenate([np.einsum("ij,ij->i", features[s:s + step], features[s:s + step],
                                   dtype=np.float64)
                         for s in range(0, len(features), step)])
    big = ~(sq <= MAX_SQNORM)
    if big.any():
        rows = positions[big]
        raise EvaluationError(f"{what}: {len(rows)} row(s) have values too large for float32 "
                              f"distances (L2 norm up to {float(np.sqrt(sq[big].max())):.3g}, "
                              f"limit {float(np.sqrt(MAX_SQNORM)):.3g}; first at position "
                              f"{rows[0]})",
                              "re-extract those features or rescale them (e.g. "
                              + param("feat_norm", "global") + ")")


def normalize_features(features: np.ndarray, mode: str, parts: int = 6,
                       inplace: bool = False) -> np.ndarray:
    """``none`` | ``global`` (whole row to unit norm) | ``parts`` (each of ``parts`` equal
    slices to unit norm, PCB-style; DART3 §6.1). [n, D] → float32 [n, D] (``none`` returns
    ``features`` as given). ``inplace``: overwrite a float32 ``features`` the caller owns
    (e.g. rows just read from a store) instead of making a copy."""
    if mode == "none":
        return features
    if mode == "global":
        return l2_normalize(features, inplace=inplace)
    if mode == "parts":
        dim = features.shape[1]
        if parts < 1 or dim % parts:
            raise EvaluationParameterError("evaluation", "n_parts", parts,
                                           f"does not divide the feature dimension {dim} "
                                           "(feat_norm='parts')",
                                           "give a divisor of the dimension")
        out = l2_normalize(np.asarray(features).reshape(len(features) * parts, dim // parts),
                           inplace=inplace)
        return out.reshape(len(features), dim)
    raise EvaluationParameterError("evaluation", "feat_norm", mode, "is unknown",
                          f"use one of {', '.join(FEATURE_NORMS)}")


# -- metrics -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Points:
    """A prepared point set: features (backend array) [n, D] and, for euclidean metrics,
    squared norms [n]."""

    features: Any
    sqnorm: Any = None

    def __len__(self) -> int:
        return int(self.features.shape[0])


#: distance GEMM precisions (:data:`reidcli.params.PRECISION`; ``fp32`` is accepted too):
#: float32 (default) or bf16 (bfloat16 inputs, fp32 accumulation; the product is rounded to
#: bfloat16 on the CPU, so near-equal distances may tie: opt-in)
PRECISIONS = PRECISION.values


class FeatureMetric:
    """Euclidean, squared euclidean or cosine distance between feature rows (one GEMM).

    With the NumPy backend blocks are NumPy arrays; otherwise torch tensors on the backend's
    device. ``precision="bf16"`` keeps bfloat16 copies of the prepared rows (torch tensors,
    half the memory) and runs the GEMM in bfloat16 with float32 accumulation; squared norms
    and the rest of the distance stay float32.
    """

    def __init__(self, name: str, backend, precision: str = "float32"):
        if name not in METRICS:
            raise EvaluationError(f"distance {name!r} is unknown",
                                  f"use one of {', '.join(METRICS)}")
        self.name = name
        self.backend = backend
        self.precision = check_param("evaluation", "precision", precision, PRECISION,
                                     error=EvaluationParameterError)
        self.on_torch = backend.is_torch

    def prepare(self, features: np.ndarray, *, normalized: bool = False,
                owned: bool = False) -> Points:
        """Prepared rows of ``features`` [n, D].

        normalized: the rows already have unit L2 norm (a store feature marked
        ``normalized``, or rows just normalised by ``feat_norm``): cosine skips normalising.
        owned: the caller hands ``features`` over, so cosine may normalise it in place.
        """
        feats = np.asarray(features)
        copied = not (feats.dtype == np.float32 and feats.flags.c_contiguous)
        feats = np.ascontiguousarray(feats, dtype=np.float32)
        if self.name == "cosine" and not normalized:
            feats = l2_normalize(feats, inplace=owned or copied)
        sq = None
        if self.name != "cosine":
            sq = squared_norms(feats)
        if self.on_torch or self.precision == "bf16":
            import torch
            dev = self.backend.device if self.on_torch else torch.device("cpu")
            rows = torch.from_numpy(feats).to(dev)
            if self.precision == "bf16":
                rows = rows.to(torch.bfloat16)
            if sq is not None and self.on_torch:
                sq = torch.from_numpy(sq).to(dev)
            return Points(rows, sq)
        return Points(feats, sq)

    def subset(self, points: Points, index: np.ndarray | slice | None) -> Points:
        """Rows ``index`` of a prepared set (a slice gives a view, an index array a copy)."""
        if index is None:
            return points
        if isinstance(index, slice):
            return Points(points.features[index], None if points.sqnorm is None
                          else points.sqnorm[index])
        index = np.asarray(index, dtype=np.int64)
        rows = _take_rows(points.features, index)
        return Points(rows, None if points.sqnorm is None else _take_rows(points.sqnorm, index))

    def pairwise(self, a: Points, b: Points, out: np.ndarray | None = None):
        """Distances [len(a), len(b)] (float32). ``out``: a float32 [len(a), len(b)] buffer
        the NumPy float32 path writes them into (:func:`~reidcli.pairwise.gemm_distances`);
        the other paths return a new array or tensor. Use the returned value."""
        if self.on_torch:
            return self._pairwise_torch(a, b)
        if self.precision == "bf16":
            d = (a.features @ b.features.T).float().numpy()      # bf16 GEMM, fp32 accumulate
            return finish_distances(d, self.name, a.sqnorm, b.sqnorm)
        return gemm_distances(a.features, b.features, self.name, a.sqnorm, b.sqnorm, out=out,
                              map_rows=getattr(self.backend, "map_row_slices", None))

    def paired(self, a: Points, b: Points):
        """Distances between matching rows, a[i] to b[i] → [n] (same formula as pairwise)."""
        if self.on_torch:
            dot = (a.features.float() * b.features.float()).sum(dim=1)
            if self.name == "cosine":
                return 1.0 - dot
            d = (a.sqnorm + b.sqnorm - 2.0 * dot).clamp_(min=0.0)
            return d.sqrt_() if self.name == "euclidean" else d
        fa, fb = a.features, b.features
        if self.precision == "bf16":
            fa, fb = fa.float().numpy(), fb.float().numpy()
        dot = np.einsum("ij,ij->i", fa, fb)
        if self.name == "cosine":
            return np.float32(1.0) - dot
        d = np.maximum(a.sqnorm + b.sqnorm - np.float32(2.0) * dot, np.float32(0.0))
        return np.sqrt(d) if self.name == "euclidean" else d

    def _pairwise_torch(self, a: Points, b: Points):
        import torch
        prod = _low_precision_product(a.features, b.features) if self.precision == "bf16" \
            else a.features @ b.features.T
        if self.name == "cosine":
            return 1.0 - prod
        d = torch.add(a.sqnorm[:, None] + b.sqnorm[None, :], prod, alpha=-2.0).clamp_(min=0.0) \
            if self.precision == "bf16" else \
            torch.addmm(a.sqnorm[:, None] + b.sqnorm[None, :], a.features, b.features.T,
                        beta=1.0, alpha=-2.0).clamp_(min=0.0)
        return d.sqrt_() if self.name == "euclidean" else d

    def describe(self) -> str:
        return self.name if self.precision == "float32" else f"{self.name} ({self.precision})"


def _low_precision_product(a, b):
    """a @ bᵀ of bfloat16 tensors as float32 [len(a), len(b)]: float32 output straight from
    the GEMM where torch offers it (CUDA), else the bfloat16 product widened."""
    import torch
    try:
        return torch.mm(a, b.T, out_dtype=torch.float32)
    except (TypeError, RuntimeError, NotImplementedError):
        return (a @ b.T).float()


def _take_rows(array, index: np.ndarray):
    """``array[index]`` for a NumPy array or a torch tensor (index moved to its device)."""
    if isinstance(array, np.ndarray):
        return array[index]
    import torch
    return array[torch.from_numpy(index).to(array.device)]


class ModelMetric:
    """Distances from a fitted model's ``embedded_distance(query_block [q, d],
    gallery_block [g, d])`` on rows the model has already transformed."""

    def __init__(self, model, backend, label: str = "model"):
        self.model = model
        self.backend = backend
        self.name = label

    def prepare(self, features: np.ndarray, *, normalized: bool = False,
                owned: bool = False) -> Points:
        """The rows as given (the model's distance needs no preparation; ``normalized`` and
        ``owned`` are accepted for the common metric interface and have no effect)."""
        return Points(np.ascontiguousarray(features))

    def subset(self, points: Points, index: np.ndarray | slice | None) -> Points:
        return points if index is None else Points(points.features[index])

    def pairwise(self, a: Points, b: Points, out: np.ndarray | None = None):
        """Distances [len(a), len(b)] from the model (a new array: ``out``, accepted for the
        common metric interface, is not written; use the returned value)."""
        d = np.asarray(self.model.embedded_distance(a.features, b.features))
        if d.shape != (len(a), len(b)):
            raise EvaluationError(f"{self.name}: embedded_distance() returned shape {d.shape} for "
                                  f"{len(a)} × {len(b)} inputs", "the fitted model is faulty")
        if d.dtype.kind != "f":
            d = d.astype(np.float64)
        if np.isnan(d).any():
            raise EvaluationError(f"{self.name}: embedded_distance() returned NaN values",
                                  "check the features and the fitted model")
        if self.backend.is_torch:
            import torch
            return torch.from_numpy(np.ascontiguousarray(d)).to(self.backend.device)
        return d

    def describe(self) -> str:
        return self.name


def check_query_gallery(query_features: np.ndarray, gallery_features: np.ndarray,
                        checked: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Validate query [Q, D] and gallery [G, D] features: finite, 2-D, same dimension.
    ``checked``: both already passed :func:`check_features` (finite, magnitude): only the
    dimensions are compared (no second pass over every value)."""
    if not checked:
        query_features = check_features(query_features, "query features")
        gallery_features = check_features(gallery_features, "gallery features")
    if query_features.shape[1] != gallery_features.shape[1]:
        raise EvaluationError(f"query features have dimension {query_features.shape[1]} "
                              f"but gallery features {gallery_features.shape[1]}",
                              "evaluate features of one extractor/model")
    return query_features, gallery_features


class QueryGallery:
    """Distance blocks between a trial's queries and (a subset of) its gallery.

    ``block(query_pos, gallery_pos)`` → [len(query_pos), len(gallery_pos)]; ``gallery_pos``
    None means the whole gallery. Prepared gallery subsets are cached per index array.
    """

    def __init__(self, metric, query_features: np.ndarray, gallery_features: np.ndarray, *,
                 normalized: bool = False, owned: bool = False, checked: bool = False):
        """normalized / owned: see :meth:`FeatureMetric.prepare`; checked: see
        :func:`check_query_gallery`."""
        query_features, gallery_features = check_query_gallery(query_features,
                                                               gallery_features, checked)
        self.metric = metric
        self.query = metric.prepare(query_features, normalized=normalized, owned=owned)
        self.gallery = metric.prepare(gallery_features, normalized=normalized, owned=owned)
        self.num_query = len(query_features)
        self.num_gallery = len(gallery_features)
        self._cache_key: int | None = None
        self._cache: Points | None = None

    def gallery_subset(self, gallery_pos: np.ndarray | None) -> Points:
        if is_full_range(gallery_pos, self.num_gallery):
            return self.gallery
        if self._cache_key != id(gallery_pos):
            self._cache = self.metric.subset(self.gallery, gallery_pos)
            self._cache_key = id(gallery_pos)
        return self._cache

    #: :meth:`block` takes ``out`` (a buffer the caller reuses from block to block)
    fills_out = True

    def block(self, query_pos: np.ndarray, gallery_pos: np.ndarray | None = None,
              out: np.ndarray | None = None):
        """Distances [len(query_pos), len(gallery_pos)]; ``out``: a float32 buffer of that
        shape written where the metric can (:meth:`FeatureMetric.pairwise`); use the
        returned block."""
        return self.metric.pairwise(self.metric.subset(self.query, as_slice(query_pos)),
                                    self.gallery_subset(gallery_pos), out=out)


class MatrixDistances:
    """Blocks of a precomputed distance matrix [Q, G] (NumPy), e.g. from another tool."""

    def __init__(self, distances: np.ndarray):
        distances = np.asarray(distances)
        if distances.ndim != 2:
            raise EvaluationError(f"distance matrix has shape {distances.shape}",
                                  "give a [num_query, num_gallery] matrix")
        if np.isnan(distances).any():
            raise EvaluationError("distance matrix holds NaN values", "fix the distances")
        self.distances = distances
        self.num_query, self.num_gallery = distances.shape

    def block(self, query_pos: np.ndarray, gallery_pos: np.ndarray | None = None):
        rows = self.distances[as_slice(query_pos)]
        if not is_full_range(gallery_pos, self.num_gallery):
            rows = np.take(rows, gallery_pos, axis=1)
        return np.ascontiguousarray(rows)


def is_full_range(positions: np.ndarray | None, n: int) -> bool:
    """True when ``positions`` (sorted, unique) is None or all of ``0..n-1``."""
    return positions is None or (len(positions) == n and (n == 0 or (
        int(positions[0]) == 0 and int(positions[-1]) == n - 1)))


def as_slice(positions: np.ndarray) -> np.ndarray | slice:
    """A slice when ``positions`` is a contiguous ascending run (no copy on indexing), else
    ``positions`` unchanged."""
    positions = np.asarray(positions)
    if len(positions) and int(positions[-1]) - int(positions[0]) == len(positions) - 1 and \
            (len(positions) < 2 or bool(np.all(np.diff(positions) == 1))):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions
