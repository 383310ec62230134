"""Evaluate plain arrays (no store): features or a distance matrix plus pids and cameras."""
from __future__ import annotations

import numpy as np

from reidcli.evaluation.backend import make_backend, resolve_device
from reidcli.evaluation.distances import FeatureMetric, MatrixDistances, QueryGallery
from reidcli.evaluation.engine import EvalOptions, TrialResult, evaluate_trial
from reidcli.evaluation.protocols import TrialLabels, get_protocol


def evaluate_arrays(query_pids, query_cams, gallery_pids, gallery_cams, *,
                    query_features: np.ndarray | None = None,
                    gallery_features: np.ndarray | None = None,
                    distances: np.ndarray | None = None, metric: str = "euclidean",
                    protocol: str = "market", options: EvalOptions | None = None,
                    device: str = "cpu", trial: int = 0, query_ids=None,
                    gallery_ids=None) -> TrialResult:
    """Score one query/gallery split given as arrays.

    Either ``query_features`` [Q, D] and ``gallery_features`` [G, D] (distances by ``metric``,
    block-wise) or a precomputed ``distances`` matrix [Q, G]. pids/cams are [Q] / [G] ints
    (pid -1 junk, 0 distractor); identity codes default to the pids.
    """
    labels = TrialLabels.from_arrays(query_pids, query_cams, gallery_pids, gallery_cams,
                                     query_ids=query_ids, gallery_ids=gallery_ids)
    backend = make_backend(resolve_device(device))
    try:
        if distances is not None:
            source = MatrixDistances(distances)
        else:
            source = QueryGallery(FeatureMetric(metric, backend), query_features,
                                  gallery_features)
        if (source.num_query, source.num_gallery) != (labels.num_queries, labels.num_gallery):
            raise ValueError(f"distances are {source.num_query}×{source.num_gallery} but labels "
                             f"give {labels.num_queries} queries and {labels.num_gallery} "
                             "gallery entries")
        return evaluate_trial(source, labels, get_protocol(protocol), options, backend=backend,
                              trial=trial)
    finally:
        backend.close()
