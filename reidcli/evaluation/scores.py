"""Scores derived from CMC curves (PUR, CMC-AUC) and the camera-bias NMI of features.

* PUR (Pedagadi et al. 2013; docs/methods/cdpcf.md): with ``M(r) = CMC(r) − CMC(r−1)`` over the
  gallery ranks ``r = 1..N_g``, ``PUR = [log N_g + Σ M(r) log M(r)] / log N_g`` (0·log 0 = 0),
  returned as a fraction (1 = perfect ranking, 0 = uniformly random ranks).
* CMC-AUC (docs/methods/warca.md): ``mean_{r=1..R} CMC(r)``, R = gallery size unless given.
* NMI (docs/methods/dart3.md): k-means clusters of L2-normalised features against camera ids.
"""
from __future__ import annotations

import numpy as np

from reidcli.evaluation.errors import EvaluationError, EvaluationParameterError


def pur(cmc_full: np.ndarray, gallery_size: int) -> float | None:
    """Proportion of Uncertainty Removed of a full CMC curve [N_g] (None when N_g < 2)."""
    if gallery_size < 2:
        return None
    cmc_full = np.asarray(cmc_full, dtype=np.float64)
    if len(cmc_full) < gallery_size:
        cmc_full = np.concatenate([cmc_full, np.full(gallery_size - len(cmc_full),
                                                     cmc_full[-1] if len(cmc_full) else 0.0)])
    m = np.diff(np.concatenate([[0.0], cmc_full[:gallery_size]]))
    m = np.clip(m, 0.0, None)
    positive = m > 0
    plogp = np.sum(m[positive] * np.log(m[positive]))
    return float((np.log(gallery_size) + plogp) / np.log(gallery_size))


def cmc_auc(cmc_full: np.ndarray, max_rank: int | None = None) -> float:
    """Mean of CMC(1..R) (R = ``max_rank`` or the curve's length), a fraction in [0, 1]."""
    cmc_full = np.asarray(cmc_full, dtype=np.float64)
    r = len(cmc_full) if max_rank is None else int(max_rank)
    if r < 1:
        raise EvaluationParameterError("CMC-AUC", "auc_max_rank", max_rank, "must be ≥ 1",
                                       "give a positive rank")
    if r > len(cmc_full):          # flat tail past the curve, summed without allocating it
        tail = float(cmc_full[-1]) if len(cmc_full) else 0.0
        return float((np.sum(cmc_full) + (r - len(cmc_full)) * tail) / r)
    return float(np.mean(cmc_full[:r]))


def nmi_camera_bias(features: np.ndarray, cameras: np.ndarray, pids: np.ndarray | None = None,
                    k: str | int = "cams", restarts: int = 5, max_iter: int = 100,
                    sample_limit: int = 50_000, seed: int = 0) -> dict:
    """Normalised mutual information between k-means clusters of features and camera ids.

    features [n, D] (L2-normalised here), cameras [n] (any hashable camera keys as ints),
    pids [n] (needed for ``k="ids"``). ``k``: ``"cams"`` = number of distinct cameras,
    ``"ids"`` = number of distinct pids, or an integer. K-means++ with ``restarts`` seeds
    0..restarts-1, at most ``max_iter`` Lloyd iterations, lowest inertia kept; NMI with the
    arithmetic normalisation (1.0 when both labelings have zero entropy). Returns
    ``{"nmi", "k", "num_samples", "restarts"}``.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    from reidcli.evaluation.distances import l2_normalize

    features = np.asarray(features, dtype=np.float32)
    cameras = np.asarray(cameras)
    n = len(features)
    if n == 0:
        raise EvaluationError("NMI: no features to cluster", "evaluate a non-empty store")
    if n > sample_limit:
        pick = np.sort(np.random.default_rng(seed).choice(n, sample_limit, replace=False))
        features, cameras = features[pick], cameras[pick]
        pids = None if pids is None else np.asarray(pids)[pick]
    if k == "cams":
        n_clusters = len(np.unique(cameras))
    elif k == "ids":
        if pids is None:
            raise EvaluationParameterError("NMI", "nmi_k", k, "needs person ids (pids)",
                                           "use nmi_k='cams'")
        n_clusters = len(np.unique(pids))
    else:
        try:
            n_clusters = int(k)
        except (TypeError, ValueError):
            raise EvaluationParameterError("NMI", "nmi_k", k, "is not cams, ids or an integer",
                                           "use nmi_k='cams'") from None
    if not 1 <= n_clusters <= len(features):
        raise EvaluationParameterError("NMI", "nmi_k", k,
                                       f"gives {n_clusters} clusters for {len(features)} samples",
                                       "choose 1 ≤ k ≤ number of samples")
    x = l2_normalize(features)
    best_labels, best_inertia = None, np.inf
    for s in range(restarts):
        km = KMeans(n_clusters=n_clusters, init="k-means++", n_init=1, max_iter=max_iter,
                    random_state=s).fit(x)
        if km.inertia_ < best_inertia:
            best_labels, best_inertia = km.labels_, km.inertia_
    value = normalized_mutual_info_score(cameras, best_labels, average_method="arithmetic")
    return {"nmi": float(value), "k": int(n_clusters), "num_samples": int(len(x)),
            "restarts": int(restarts)}
