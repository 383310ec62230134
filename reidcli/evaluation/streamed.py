"""Score a trial whose gallery is read block by block (galleries larger than memory).

The in-memory engine (:mod:`reidcli.evaluation.engine`) ranks a block of queries against the
whole gallery at once. Here the gallery is read in blocks of rows (e.g. from an HDF5 store)
and never held whole; the queries stay in memory. A query's metrics only need the rank of
each of its *specials* (gallery entries of its identity, docs/evaluation.md):

    rank_all(c) = #{columns c' : (d[c'], c') < (d[c], c)}            (lexicographic)

and that count is a sum over gallery blocks. So the trial is scored in two passes:

1. the specials' distances: for each gallery block, the specials in it, one GEMM per batch of
   queries of neighbouring identities against the gallery rows those queries need;
2. every gallery block against every query block (one GEMM each): the block's columns that
   come before each special are counted from a row-sorted copy by binary search (ties broken
   by column, as in the in-memory engine); the specials' own columns are left out of these
   counts and counted from pass 1's values instead, so a special's place among the other
   specials is decided by one value only.

The counts then give the same :class:`~reidcli.evaluation.ranking.BlockRanks` as the
in-memory engine, and the same metrics whenever the GEMM returns the same values for the same
rows in another block shape (BLAS does for all but very small blocks).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from reidcli.evaluation import ranking
from reidcli.evaluation.backend import NumpyBackend
from reidcli.evaluation.distances import Points, check_features
from reidcli.evaluation.engine import (EvalOptions, TrialResult, curve_length, to_backend,
                                       check_max_rank, new_outcomes, store_block_metrics,
                                       summarize_trial)
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.protocols import Protocol, TrialLabels, make_groups
from reidcli.progress import track

#: queries per GEMM of pass 1 (queries sorted by identity, so a batch needs few gallery rows)
SPECIALS_QUERY_BATCH = 256


def streaming_limitation(protocol: Protocol) -> str | None:
    """Why ``protocol`` cannot be scored with a streamed gallery, or None when it can (the
    de-duplicated CMC and single-gallery-shot rules read whole distance rows)."""
    if protocol.deduplicate_cmc:
        return f"protocol {protocol.name} de-duplicates the CMC over whole distance rows"
    if protocol.single_gallery_shot:
        return f"protocol {protocol.name} samples one gallery image per identity over whole rows"
    return None


class StreamedGallery:
    """Queries in memory, gallery rows read on demand.

    metric: a :class:`~reidcli.evaluation.distances.FeatureMetric` or ``ModelMetric``.
    query_features: [Q, D]. read_gallery(positions [n] sorted, unique) → features [n, D] of
    those gallery positions (checked and normalised as the metric expects).
    normalized: rows already have unit L2 norm (cosine skips normalising them).
    owned: the query array is handed over (may be normalised in place).
    """

    def __init__(self, metric, query_features: np.ndarray,
                 read_gallery: Callable[[np.ndarray], np.ndarray], num_gallery: int,
                 dim: int, *, normalized: bool = False, owned: bool = False):
        query_features = check_features(query_features, "query features")
        if query_features.shape[1] != dim:
            raise EvaluationError(f"query features have dimension {query_features.shape[1]} "
                                  f"but gallery features {dim}",
                                  "evaluate features of one extractor/model")
        self.metric = metric
        self.normalized = normalized
        self.query = metric.prepare(query_features, normalized=normalized, owned=owned)
        self.read_gallery = read_gallery
        self.num_query = len(query_features)
        self.num_gallery = int(num_gallery)
        self.dim = int(dim)

    def gallery(self, positions: np.ndarray) -> Points:
        """Prepared gallery rows at ``positions`` [n] (sorted, unique)."""
        feats = np.asarray(self.read_gallery(np.asarray(positions, dtype=np.int64)))
        if feats.shape != (len(positions), self.dim):
            raise EvaluationError(f"gallery block has shape {feats.shape}, expected "
                                  f"{(len(positions), self.dim)}",
                                  "the gallery reader is faulty")
        return self.metric.prepare(feats, normalized=self.normalized, owned=True)

    def queries(self, qpos: np.ndarray) -> Points:
        return self.metric.subset(self.query, qpos)


def evaluate_streamed(source: StreamedGallery, labels: TrialLabels, protocol: Protocol,
                      options: EvalOptions | None = None, backend=None, trial: int = 0,
                      check_distances: bool = False, split=None) -> TrialResult:
    """Score one trial with the gallery read block by block (see module doc); same result as
    :func:`reidcli.evaluation.engine.evaluate_trial` on the same distances. ``split``: a
    :class:`reidcli.evaluation.distributed.GallerySplit` under torchrun (this rank reads and
    ranks its own run of the blocks; the partial results are merged exactly)."""
    options = options or EvalOptions()
    labels.validate()
    why = streaming_limitation(protocol)
    if why is not None:
        raise EvaluationError(f"a streamed gallery cannot be scored: {why}",
                              "evaluate with the gallery in memory")
    if (source.num_query, source.num_gallery) != (labels.num_queries, labels.num_gallery):
        raise EvaluationError(f"distances are {source.num_query}×{source.num_gallery} but the "
                              f"labels give {labels.num_queries} queries and "
                              f"{labels.num_gallery} gallery entries", "the caller is faulty")
    check_max_rank(options.max_rank, curve_length(protocol, labels), trial)
    own_backend = backend is None
    backend = backend or NumpyBackend()
    try:
        out, selected = new_outcomes(labels, protocol, options)
        for group in make_groups(protocol, labels):
            queries = group.query_pos[selected[group.query_pos]]
            if len(group.gallery_pos) and len(queries):
                _score_group(out, source, labels, protocol, options, backend, queries,
                             group.gallery_pos, check_distances, split)
    finally:
        if own_backend:
            backend.close()
    return summarize_trial(out, labels, protocol, options, trial)


def _score_group(out, source: StreamedGallery, labels: TrialLabels, protocol: Protocol,
                 options: EvalOptions, backend, queries: np.ndarray, gpos: np.ndarray,
                 check_distances: bool, split=None) -> None:
    """Ranks and metrics of ``queries`` [n] against the gallery positions ``gpos`` [g]."""
    # queries of one identity next to each other: a batch of pass 1 needs few gallery rows
    queries = queries[np.argsort(labels.query_ids[queries], kind="stable")]
    index = ranking.IdentityIndex(labels.gallery_ids[gpos])
    cols, present, _ = index.columns_of(labels.query_ids[queries])          # [n, k]
    removed = np.zeros_like(present)
    if protocol.same_camera_removal:
        removed = present & (labels.gallery_camera[gpos][cols]
                             == labels.query_camera[queries][:, None])
    block = options.gallery_rows_per_block(source.dim)
    starts = np.arange(0, len(gpos), block)
    mine = present
    if split is not None:       # this rank's blocks only; the others' values merged in
        first, last = split.block_range(len(starts))
        mine = present & (cols >= first * block) & (cols < last * block)
        starts = starts[first:last]
    special_d = _special_distances(source, backend, gpos, queries, cols, mine, starts,
                                   block, options.progress)
    if split is not None:
        special_d = split.merge_distances(special_d, mine, present)
    if check_distances and np.isnan(special_d[present]).any():
        raise EvaluationError("distances hold NaN values", "check the features or model")
    specials = ranking.sort_specials(special_d, cols, present, removed)
    counts = _count_columns_before(source, backend, gpos, queries, specials, starts, block,
                                   options, check_distances) if len(starts) else \
        np.zeros(cols.shape, dtype=np.int64)
    if split is not None:
        counts = split.merge_counts(counts)
    # + the specials ranked before each one (sort_specials order: absent ones come last)
    rank_all = counts + np.arange(cols.shape[1])[None, :]
    block_ranks = ranking.ranks_after_removal(specials, rank_all)
    store_block_metrics(out, queries, block_ranks, options.ap_convention)


def _special_distances(source: StreamedGallery, backend, gpos: np.ndarray,
                       queries: np.ndarray, cols: np.ndarray, present: np.ndarray,
                       starts: np.ndarray, block: int, progress: bool) -> np.ndarray:
    """Pass 1: distance of every (query, special) pair, float64 [n, k] (inf where absent)."""
    special_d = np.full(cols.shape, np.inf, dtype=np.float64)
    pair_q, pair_s = np.nonzero(present)                  # pairs ordered by query
    pair_c = cols[pair_q, pair_s]
    by_column = np.argsort(pair_c, kind="stable")
    pair_q, pair_s, pair_c = pair_q[by_column], pair_s[by_column], pair_c[by_column]
    edges = np.searchsorted(pair_c, np.append(starts, len(gpos)))
    chunks = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    for lo, hi in track(chunks, description="distances to the positives", unit="blocks",
                        enabled=progress and len(chunks) > 1):
        cq, cs, cc = pair_q[lo:hi], pair_s[lo:hi], pair_c[lo:hi]
        needed = np.unique(cc)
        rows = source.gallery(gpos[needed])
        by_query = np.argsort(cq, kind="stable")
        cq, cs, cc = cq[by_query], cs[by_query], cc[by_query]
        batch = cq // SPECIALS_QUERY_BATCH
        cut = np.flatnonzero(np.diff(batch)) + 1
        for bq, bs, bc in zip(np.split(cq, cut), np.split(cs, cut), np.split(cc, cut)):
            uq, q_at = np.unique(bq, return_inverse=True)
            uc, c_at = np.unique(bc, return_inverse=True)
            d = source.metric.pairwise(source.queries(queries[uq]),
                                       source.metric.subset(rows, np.searchsorted(needed, uc)))
            special_d[bq, bs] = backend.to_numpy(d)[q_at, c_at]
        del rows
    return special_d


def _count_columns_before(source: StreamedGallery, backend, gpos: np.ndarray,
                          queries: np.ndarray, specials: ranking.SortedSpecials,
                          starts: np.ndarray, block: int, options: EvalOptions,
                          check_distances: bool) -> np.ndarray:
    """Pass 2: per (query, special), the non-special columns ranked before it. int64 [n, k]."""
    n = len(queries)
    counts = np.zeros(specials.cols.shape, dtype=np.int64)
    step = options.rows_per_block(min(block, len(gpos)))
    with ThreadPoolExecutor(1, thread_name_prefix="reid-gallery-read") as reader:
        def read(start):
            return reader.submit(source.gallery, gpos[start:start + block])

        pending = read(int(starts[0]))
        for i in track(range(len(starts)), description="ranking gallery blocks", unit="blocks",
                       enabled=options.progress and len(starts) > 1):
            start = int(starts[i])
            rows = pending.result()
            if i + 1 < len(starts):
                pending = read(int(starts[i + 1]))             # read ahead while ranking
            end = start + len(rows)
            for q0 in range(0, n, step):
                sl = slice(q0, q0 + step)
                d = source.metric.pairwise(source.queries(queries[sl]), rows)
                d = to_backend(backend, d)
                if check_distances and backend.has_nan(d):
                    raise EvaluationError("distances hold NaN values",
                                          "check the features or model")
                counts[sl] += _block_counts(backend, d, specials, sl, start, end)
            del rows
    return counts


def _block_counts(backend, d, specials: ranking.SortedSpecials, sl: slice, start: int,
                  end: int) -> np.ndarray:
    """Columns ``start:end`` (block ``d`` [b, end - start]) ranked before each special of
    the query rows ``sl``, specials' own columns left out. int64 [b, k]."""
    cols, present, values = specials.cols[sl], specials.present[sl], specials.distance[sl]
    inside = present & (cols >= start) & (cols < end)
    rows, slots = np.nonzero(inside)
    _set_entries(d, rows, cols[rows, slots] - start, np.inf)        # leave specials out
    below, upto = backend.count_below(d, values)
    # a block wholly before the special's column: its ties come first too
    add = np.where(cols >= end, upto, below)
    tied = inside & (upto > below)
    if tied.any():
        r, s = np.nonzero(tied)
        add[r, s] += backend.count_equal_before(d, r, values[r, s], cols[r, s] - start)
    return np.where(present, add, 0)


def _set_entries(d, rows: np.ndarray, cols: np.ndarray, value: float) -> None:
    """``d[rows[i], cols[i]] = value`` for a NumPy array or a torch tensor."""
    if not len(rows):
        return
    if isinstance(d, np.ndarray):
        d[rows, cols] = value
        return
    import torch
    d[torch.from_numpy(rows).to(d.device), torch.from_numpy(cols).to(d.device)] = value

