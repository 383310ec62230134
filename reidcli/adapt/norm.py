"""Camera normalisation at test time (Song et al.; DART3's Alg 1 and Tab 4 row 2; dart3.md
§4.2): every query and gallery row is z-scored with its camera's statistics,
Q̃ = (Q − M_q[c]) ⊘ Σ_q[c] and G̃ = (G − M_g[c]) ⊘ Σ_g[c], with the initial (pooled)
statistics of :func:`~reidcli.adapt.statistics.camera_statistics`. No optimisation; the
result does not depend on batch size or order.
"""
from __future__ import annotations

import numpy as np

from reidcli.adapt.statistics import CameraStatistics, normalize_by_camera


def normalized_queries(queries: np.ndarray, codes: np.ndarray,
                       stats: CameraStatistics) -> np.ndarray:
    """Q̃ [N, d] of query rows ``queries`` [N, d] with camera codes ``codes`` [N]."""
    return normalize_by_camera(queries, codes, stats.mean_q, stats.std_q)


def normalized_gallery(gallery: np.ndarray, codes: np.ndarray,
                       stats: CameraStatistics) -> np.ndarray:
    """G̃ [Ng, d] with the frozen gallery statistics (also DART3's scoring gallery)."""
    return normalize_by_camera(gallery, codes, stats.mean_g, stats.std_g)


__all__ = ["normalized_queries", "normalized_gallery"]
