"""Toy problems shared by the metric-learning tests."""
from __future__ import annotations

import numpy as np


def camera_offset_toy(seed=0, train_ids=150, test_ids=100, dim=60, signal=6, spread=1.0):
    """The WARCA paper's kind of toy problem (docs/methods/warca.md): identity signal in
    ``signal`` dims (× ``spread``), per-camera offsets + noise 2.0 in the other ``dim − signal``;
    2 cameras × 2 images per id. Returns train x [4·train_ids, dim], pids, and test
    query [test_ids, dim] / gallery [test_ids, dim] = the first cam-0 / cam-1 image of each
    test id."""
    rng = np.random.default_rng(seed)
    offsets = rng.standard_normal((2, dim - signal))

    def make(ids):
        centres = rng.standard_normal((ids, signal))
        pids, cams = np.repeat(np.arange(ids), 4), np.tile([0, 0, 1, 1], ids)
        x = np.concatenate([centres[pids] + 0.35 * rng.standard_normal((4 * ids, signal)),
                            offsets[cams] + 2.0 * rng.standard_normal((4 * ids, dim - signal))],
                           1)
        x[:, :signal] *= spread
        return x, pids

    (xtr, ptr), (xte, _) = make(train_ids), make(test_ids)
    return xtr, ptr, xte[0::4], xte[2::4]


def rank1_of_distances(d) -> float:
    """Rank-1 when query i's true match is gallery row i: d [q, q] → fraction."""
    return float((np.asarray(d).argmin(1) == np.arange(len(d))).mean())


def rank1_of_embeddings(zq, zg) -> float:
    """Rank-1 of embeddings zq [q, d], zg [q, d] under squared Euclidean distance."""
    return rank1_of_distances(((zq[:, None, :] - zg[None, :, :]) ** 2).sum(-1))
