"""Ranking metrics for a block of queries at once: CMC, AP (two conventions), mINP.

The ranked list of a query is ``numpy.argsort(d, kind="stable")`` of its distance row
(docs/datasets.md): ties go to the gallery entry that comes first. Nothing here builds that
index array. A query only needs the rank of each of its *special* columns — the gallery
entries of its own identity, either positives or entries its rule removes (same id and
camera under E1) — and

    rank_all(c) = #{columns c' : (d[c'], c') < (d[c], c)}        (lexicographic)

is found by counting the row's entries below and up to each special's distance
(``backend.count_below``: on the CPU from the few entries up to the query's farthest special,
else by binary search in a sorted copy of the row), ties with other columns counted exactly by
column index. Removed specials before a positive are subtracted, which gives the positive's
rank in the list after removal. No index argsort of a row is ever built.

Columns that a rule removes for *every* query of a group (junk images, SYSU's same-location
cameras) are dropped from the group's gallery before ranking, so only identity-specific
removals reach this module.
"""
from __future__ import annotations

import dataclasses

import numpy as np

AP_CONVENTIONS = ("sum-of-precisions", "market-official")


class IdentityIndex:
    """Gallery columns grouped by identity code.

    ``gallery_ids`` [g] int64 identity codes. ``columns_of(query_ids)`` returns, per query,
    the columns of its identity in ascending order (padded), i.e. the query's specials.
    """

    def __init__(self, gallery_ids: np.ndarray):
        gallery_ids = np.asarray(gallery_ids, dtype=np.int64)
        self.num_columns = len(gallery_ids)
        #: column order grouping identities; stable, so columns ascend inside each identity
        self.order = np.argsort(gallery_ids, kind="stable")
        self.ids, self.starts, self.counts = np.unique(gallery_ids[self.order],
                                                       return_index=True, return_counts=True)

    def segment_of(self, query_ids: np.ndarray) -> np.ndarray:
        """Index into ``self.ids`` of each query's identity, -1 when absent. int64 [b]."""
        query_ids = np.asarray(query_ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.full(len(query_ids), -1, dtype=np.int64)
        pos = np.searchsorted(self.ids, query_ids)
        pos_clipped = np.minimum(pos, len(self.ids) - 1)
        found = (self.ids[pos_clipped] == query_ids) & (query_ids >= 0)
        return np.where(found, pos_clipped, -1)

    def columns_of(self, query_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(cols [b, k] int64, present [b, k] bool, segment [b] int64)``.

        ``cols[i, :counts]`` are the gallery columns of query i's identity in ascending
        order; padding holds column 0 with ``present`` False. ``k`` = the block's largest
        identity size (at least 1).
        """
        segment = self.segment_of(query_ids)
        counts = np.where(segment >= 0, self.counts[np.maximum(segment, 0)], 0) \
            if len(self.ids) else np.zeros(len(segment), dtype=np.int64)
        k = max(1, int(counts.max()) if len(counts) else 1)
        slot = np.arange(k)[None, :]
        present = slot < counts[:, None]
        starts = self.starts[np.maximum(segment, 0)] if len(self.ids) else np.zeros_like(segment)
        flat = np.where(present, starts[:, None] + slot, 0)
        cols = self.order[flat] if self.num_columns else np.zeros_like(flat)
        return cols.astype(np.int64), present, segment


@dataclasses.dataclass
class BlockRanks:
    """Ranks of a block's positives after removal, one row per query.

    ``rank`` [b, k] int64: 0-based rank of each special in the query's list after removal
    (only meaningful where ``positive``), specials ordered as in the ranked list;
    ``positive`` [b, k] bool; ``first_distance`` [b] and ``first_column`` [b]: distance and
    column of the first positive (inf / -1 when the query has none).
    """

    rank: np.ndarray
    positive: np.ndarray
    first_distance: np.ndarray
    first_column: np.ndarray

    @property
    def num_positives(self) -> np.ndarray:
        return self.positive.sum(axis=1)


@dataclasses.dataclass
class SortedSpecials:
    """A block's specials in ranked-list order (by distance, ties by column): ``distance``
    [b, k] (inf where absent), ``cols`` [b, k], ``present`` [b, k], ``removed`` [b, k]."""

    distance: np.ndarray
    cols: np.ndarray
    present: np.ndarray
    removed: np.ndarray


def sort_specials(special_d: np.ndarray, cols: np.ndarray, present: np.ndarray,
                  removed: np.ndarray) -> SortedSpecials:
    """Order each query's specials as its ranked list does. special_d [b, k]: their
    distances; cols / present [b, k] from :meth:`IdentityIndex.columns_of` (columns ascend per
    row, so a stable sort breaks distance ties by column); removed [b, k]."""
    special_d = np.where(present, special_d, np.inf)
    order = np.argsort(special_d, axis=1, kind="stable")
    present = np.take_along_axis(present, order, axis=1)
    return SortedSpecials(distance=np.take_along_axis(special_d, order, axis=1),
                          cols=np.take_along_axis(cols, order, axis=1), present=present,
                          removed=np.take_along_axis(removed, order, axis=1) & present)


def rank_specials(backend, d, cols: np.ndarray, present: np.ndarray,
                  removed: np.ndarray) -> BlockRanks:
    """Ranks of each query's positives in its stable ranked list after removal.

    d: distance block [b, g] (backend array; smaller = more similar).
    cols, present: [b, k] from :meth:`IdentityIndex.columns_of`.
    removed: [b, k] bool, specials the rule removes from this query's list.
    """
    special_d = backend.gather(d, cols).astype(np.float64 if _is_f64(d) else np.float32)
    specials = sort_specials(special_d, cols, present, removed)
    below, upto = backend.count_below(d, specials.distance)
    rank_all = below
    tied = specials.present & (upto - below > 1)
    if tied.any():
        rows, slots = np.nonzero(tied)
        rank_all = rank_all.copy()
        rank_all[rows, slots] += backend.count_equal_before(
            d, rows, specials.distance[rows, slots], specials.cols[rows, slots])
    return ranks_after_removal(specials, rank_all)


def ranks_after_removal(specials: SortedSpecials, rank_all: np.ndarray) -> BlockRanks:
    """BlockRanks from each special's rank in the full list, ``rank_all`` [b, k] (specials in
    :func:`sort_specials` order): removed specials ranked before a positive are subtracted."""
    b = len(rank_all)
    removed_before = np.cumsum(specials.removed, axis=1) - specials.removed
    positive = specials.present & ~specials.removed
    rank = rank_all - removed_before
    has = positive.any(axis=1)
    first_slot = np.argmax(positive, axis=1)
    first_distance = np.where(has, specials.distance[np.arange(b), first_slot], np.inf)
    first_column = np.where(has, specials.cols[np.arange(b), first_slot], -1)
    return BlockRanks(rank=rank, positive=positive, first_distance=first_distance,
                      first_column=first_column)


def _is_f64(d) -> bool:
    return str(getattr(d, "dtype", "")).endswith("float64")


# -- per-query metrics from positive ranks ---------------------------------------------------
def first_positive_rank(ranks: BlockRanks) -> np.ndarray:
    """0-based rank of the first positive, -1 for queries without one. int64 [b]."""
    masked = np.where(ranks.positive, ranks.rank, np.iinfo(np.int64).max)
    first = masked.min(axis=1) if masked.shape[1] else np.full(masked.shape[0], -1)
    return np.where(ranks.positive.any(axis=1), first, -1)


def average_precision(ranks: BlockRanks, convention: str = "sum-of-precisions") -> np.ndarray:
    """AP of each query, NaN without positives. float64 [b].

    ``sum-of-precisions`` (torchreid / fast-reid): mean over positives of precision at the
    positive's rank, ``i / (r_i + 1)`` for the i-th positive (1-based) at 0-based rank r_i.
    ``market-official`` (the Market-1501 release's trapezoid rule): mean over positives of
    ``((i - 1) / r_i + i / (r_i + 1)) / 2`` where the first term is 1 when ``r_i = 0``.
    """
    pos = ranks.positive
    n_pos = pos.sum(axis=1)
    i = np.cumsum(pos, axis=1).astype(np.float64)      # 1-based index among positives
    r = ranks.rank.astype(np.float64)
    precision = i / (r + 1.0)
    if convention == "sum-of-precisions":
        terms = precision
    elif convention == "market-official":
        with np.errstate(divide="ignore", invalid="ignore"):
            before = np.where(r > 0, (i - 1.0) / np.where(r > 0, r, 1.0), 1.0)
        terms = 0.5 * (before + precision)
    else:
        raise ValueError(f"unknown AP convention {convention!r}; one of {AP_CONVENTIONS}")
    total = np.where(pos, terms, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_pos > 0, total / np.maximum(n_pos, 1), np.nan)


def inverse_negative_penalty(ranks: BlockRanks) -> np.ndarray:
    """INP = n_pos / (rank of the last positive + 1) per query, NaN without positives."""
    pos = ranks.positive
    n_pos = pos.sum(axis=1)
    last = np.where(pos, ranks.rank, -1).max(axis=1) if pos.shape[1] else np.full(len(pos), -1)
    return np.where(n_pos > 0, n_pos / np.maximum(last + 1.0, 1.0), np.nan)


def cmc_curve(first_ranks: np.ndarray, length: int) -> np.ndarray:
    """CMC(1..length) of valid queries' 0-based first-positive ranks. float64 [length].

    CMC(k) = fraction of the given queries whose first positive is at rank ≤ k (1-based).
    """
    first_ranks = np.asarray(first_ranks, dtype=np.int64).reshape(-1)
    if first_ranks.size == 0:
        return np.full(length, np.nan)
    hits = np.bincount(np.minimum(first_ranks, length), minlength=length + 1)[:length]
    return np.cumsum(hits) / first_ranks.size


# -- identity de-duplicated CMC (E4) ------------------------------------------------------------
def deduplicated_first_rank(d: np.ndarray, index: IdentityIndex, segment: np.ndarray,
                            ranks: BlockRanks) -> np.ndarray:
    """Rank of the query's identity in its ranked list with each identity kept at its first
    occurrence (stable), -1 without a positive. int64 [b].

    An identity's first occurrence is its (smallest distance, smallest column attaining it);
    the query's own identity occurs first at its first positive (removed specials never
    appear). The rank is the number of other identities whose first occurrence comes before.
    d: NumPy distance block [b, g].
    """
    b, g = d.shape
    if g == 0 or len(index.ids) == 0:
        return np.full(b, -1, dtype=np.int64)
    grouped = d[:, index.order]
    id_min = np.minimum.reduceat(grouped, index.starts, axis=1)            # [b, K]
    at_min = grouped == np.repeat(id_min, index.counts, axis=1)
    first_col = np.minimum.reduceat(np.where(at_min, index.order[None, :], g), index.starts,
                                    axis=1)
    fd = ranks.first_distance[:, None]
    fc = ranks.first_column[:, None]
    before = (id_min < fd) | ((id_min == fd) & (first_col < fc))
    own = np.arange(len(index.ids))[None, :] == segment[:, None]
    count = (before & ~own).sum(axis=1)
    return np.where(ranks.positive.any(axis=1), count, -1).astype(np.int64)
