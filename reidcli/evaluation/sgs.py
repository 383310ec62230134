"""CUHK03 single-gallery-shot CMC (docs/datasets.md), for a block of queries at once.

Per query: drop gallery entries of its own id and camera; then, ``repeats`` times, draw one
gallery image uniformly from each remaining identity and take the rank of the query's
identity in that sampled ranking (stable: ties go to the smaller column).

Sampling is seeded from ``(seed, split index, query index, repeat)`` without a per-query
generator: every (query, repeat, column) gets a counter-based uniform priority (SplitMix64 of
those integers), and each identity's draw is its remaining column of highest priority — a
uniform choice, reproducible for a query whatever block or order it is evaluated in.
"""
from __future__ import annotations

import numpy as np

from reidcli.evaluation.ranking import IdentityIndex

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def sampling_priority(seed: int, split: int, query_index: np.ndarray, repeat: int,
                      num_columns: int) -> np.ndarray:
    """Uniform [0, 1) priorities of shape [b, num_columns], a pure function of
    ``(seed, split, query_index[i], repeat, column)``."""
    with np.errstate(over="ignore"):
        h = _splitmix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.ones(1, np.uint64))
        h = _splitmix(h ^ np.uint64(split))
        hq = _splitmix(h ^ np.asarray(query_index, dtype=np.uint64))           # [b]
        hr = _splitmix(hq ^ np.uint64(repeat))                                 # [b]
        hc = _splitmix(hr[:, None] ^ np.arange(num_columns, dtype=np.uint64)[None, :])
    return (hc >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def single_gallery_shot_ranks(d: np.ndarray, index: IdentityIndex, segment: np.ndarray,
                              keep: np.ndarray, query_index: np.ndarray, split: int,
                              repeats: int, seed: int = 0) -> np.ndarray:
    """Rank of the query's identity in each sampled ranking. int64 [b, repeats], -1 when the
    query has no remaining image of its identity.

    d: NumPy distances [b, g]; index: gallery identities; segment [b]: the query's identity
    in ``index`` (-1 if absent); keep [b, g] bool: gallery entries left after removal;
    query_index [b]: the query's index in its trial (seeds its draws).
    """
    b, g = d.shape
    out = np.full((b, repeats), -1, dtype=np.int64)
    if g == 0 or len(index.ids) == 0:
        return out
    order, starts, counts = index.order, index.starts, index.counts
    grouped_d = d[:, order]
    grouped_keep = keep[:, order]
    col = order[None, :]
    rows = np.arange(b)
    own_seg = np.maximum(segment, 0)
    own = np.arange(len(index.ids))[None, :] == segment[:, None]
    for r in range(repeats):
        priority = sampling_priority(seed, split, query_index, r, g)[:, order]
        priority = np.where(grouped_keep, priority, -1.0)
        best = np.maximum.reduceat(priority, starts, axis=1)              # [b, K]
        chosen = (priority == np.repeat(best, counts, axis=1)) & grouped_keep
        chosen_d = np.minimum.reduceat(np.where(chosen, grouped_d, np.inf), starts, axis=1)
        chosen_c = np.minimum.reduceat(np.where(chosen, col, g), starts, axis=1)
        drawn = best >= 0.0
        od = chosen_d[rows, own_seg][:, None]
        oc = chosen_c[rows, own_seg][:, None]
        before = drawn & ~own & ((chosen_d < od) | ((chosen_d == od) & (chosen_c < oc)))
        valid = (segment >= 0) & drawn[rows, own_seg]
        out[:, r] = np.where(valid, before.sum(axis=1), -1)
    return out
