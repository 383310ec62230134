"""Pooled features from conv maps (C-DPCF paper Eq. 1–5, §III-C).

x_{k,i} = F*_i w_k^{c_i}: block g of the D = G·D' vector is Σ_{s∈A_g} w_k^{c_i}[s] f_s
(a weighted *sum*, Eq. 1); average pooling is the same with w = 1/|A_g| on every position.
"""
from __future__ import annotations

import numpy as np

from reidcli.numeric import l2_normalize_rows


def flat_maps(maps: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Conv maps [n, D', H, W] (any float dtype) → [n, D', S] in ``dtype``."""
    maps = np.asarray(maps)
    return maps.astype(dtype, copy=False).reshape(maps.shape[0], maps.shape[1], -1)


def pool_with_weight_maps(maps: np.ndarray, weights: np.ndarray,
                          positions: list[np.ndarray]) -> np.ndarray:
    """Pool with one set of maps: maps [n, D', S], weights [S, K] → x [n, K, G·D'].

    Per area one GEMM over all images: the maps viewed as [n·D', S] (columns A_g in place
    for a stripe) times w[A_g] [|A_g|, K] (Eq. 1)."""
    n, channels, size = maps.shape
    k = weights.shape[1]
    table = np.ascontiguousarray(maps).reshape(n * channels, size)
    out = np.empty((n, k, len(positions), channels), dtype=np.float64)
    for g, pos in enumerate(positions):
        stripe = len(pos) and pos[-1] - pos[0] + 1 == len(pos)
        part = table[:, int(pos[0]):int(pos[-1]) + 1] if stripe else table[:, pos]
        # [n·D', |A_g|] @ [|A_g|, K] → [n, D', K]
        out[:, :, g, :] = (part @ weights[pos]).reshape(n, channels, k).transpose(0, 2, 1)
    return out.reshape(n, k, len(positions) * channels)


def pool_by_camera(maps: np.ndarray, cam_index: np.ndarray, weight_maps: np.ndarray,
                   positions: list[np.ndarray], camera_specific: bool) -> np.ndarray:
    """x [n, K, G·D'] with each image pooled by its own camera's maps w^{c_i} (Eq. 5–6).

    ``weight_maps`` is [C·S, K] (camera-specific, block c = rows c·S..(c+1)·S−1) or [S, K];
    ``cam_index`` [n] is the 0-based position of each image's camera in the fitted cameras.
    """
    s = maps.shape[2]
    if not camera_specific:
        return pool_with_weight_maps(maps, weight_maps, positions)
    out = np.empty((maps.shape[0], weight_maps.shape[1], len(positions) * maps.shape[1]))
    for c in np.unique(cam_index):
        pick = cam_index == c
        out[pick] = pool_with_weight_maps(maps[pick], weight_maps[c * s:(c + 1) * s], positions)
    return out


def average_weights(positions: list[np.ndarray], size: int) -> np.ndarray:
    """The single "map" of average pooling: w[s] = 1/|A_g(s)|, float64 [S, 1]."""
    w = np.zeros((size, 1))
    for pos in positions:
        w[pos, 0] = 1.0 / len(pos)
    return w


def center_and_normalize(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """x̃ = (x − μ)/max(‖x − μ‖₂, 1e−12) row-wise (C-DPCF paper §III-C): [n, D] → [n, D]."""
    return l2_normalize_rows(x - mean[None, :])


def pad_by_camera(x: np.ndarray, cam_index: np.ndarray, num_cameras: int) -> np.ndarray:
    """CRAFT-style zero padding b_{c_i} ⊗ x̃: [n, D] → [n, C·D] (x̃ in block c_i)."""
    n, d = x.shape
    out = np.zeros((n, num_cameras * d), dtype=x.dtype)
    for c in range(num_cameras):
        pick = cam_index == c
        out[pick, c * d:(c + 1) * d] = x[pick]
    return out
