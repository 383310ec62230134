"""Camera normalisation at test time (Song et al.; DART3 paper Alg. 1 and Tab. 4 row 2;
docs/methods/dart3.md): every query and gallery row is z-scored with its camera's statistics,
Q̃ = (Q − M_q[c]) ⊘ Σ_q[c] and G̃ = (G − M_g[c]) ⊘ Σ_g[c], with the initial (pooled)
statistics of :func:`~reidcli.adapt.statistics.camera_statistics`. No optimisation; the
result does not depend on batch size or order.
"""
from __future__ import annotations

import numpy as np

from reidcli.adapt.statistics import CameraStatistics, normalize_by_camera
from reidcli.registry import register_info


def normalized_queries(queries: np.ndarray, codes: np.ndarray,
                       stats: CameraStatistics) -> np.ndarray:
    """Q̃ [N, d] of query rows ``queries`` [N, d] with camera codes ``codes`` [N]."""
    return normalize_by_camera(queries, codes, stats.mean_q, stats.std_q)


def normalized_gallery(gallery: np.ndarray, codes: np.ndarray,
                       stats: CameraStatistics) -> np.ndarray:
    """G̃ [Ng, d] with the frozen gallery statistics (also DART3's scoring gallery)."""
    return normalize_by_camera(gallery, codes, stats.mean_g, stats.std_g)


def _unchanged_queries(queries, codes, stats, cfg):
    return queries.copy()


def _normalized_queries(queries, codes, stats, cfg):
    return normalized_queries(queries, codes, stats)


# closed-form methods: ``closed_form(queries [N, d], codes [N], stats, cfg) -> adapted
# queries``; ``normalizes_gallery`` says whether the scoring gallery is G̃ (else the stored
# gallery); ``settings``: the groups of shared settings they read beyond every method's
# (reidcli.adapt.config.GROUPS)
register_info("none", stage="adapt", paper="—",
              summary="No-adapt: copy the queries and gallery unchanged (the source model's "
                      "result).",
              defaults=dict(batch_size=64, lr=0.0, bn_mode=None),
              extras={"closed_form": _unchanged_queries, "normalizes_gallery": False,
                      "spellings": ("no-adapt",), "label": "no adaptation"})
register_info("norm", stage="adapt", paper="DART3 paper Alg. 1 (camera normalisation)",
              summary="Camera normalisation (Alg 1): z-score every row with its camera's "
                      "statistics.",
              defaults=dict(batch_size=64, lr=0.0, bn_mode=None),
              extras={"closed_form": _normalized_queries, "normalizes_gallery": True,
                      "settings": ("stats",), "label": "camera Norm"})

__all__ = ["normalized_queries", "normalized_gallery"]
