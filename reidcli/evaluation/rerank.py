"""k-reciprocal re-ranking (Zhong et al., CVPR 2017) with memory linear in N = Q + G.

The reference formulation (the authors' ``re_ranking``) builds dense N×N arrays: the squared,
row-normalised distances, their argsort, the weight matrix V and its query expansion. Here:

1. one pass over the N×N distances keeps each item's ``M`` nearest neighbours (stable: ties
   by index) with their values and the row maximum — O(N·M). The distances of feature
   metrics are symmetric, so only the tiles on and above the diagonal are computed (one
   GEMM each): a tile [I, J] feeds the neighbour lists of rows I and, transposed, of rows J,
   which halves the GEMM work; other metrics go over whole row blocks;
2. the k-reciprocal sets R(i), their half-size sets and the expansion R*(i) are computed for
   all items with vectorised set tests on those neighbour lists;
3. V is a sparse matrix (CSR) with ``V[i, j] = exp(−a_ij) / Σ_j∈R*(i) exp(−a_ij)``, where
   ``a_ij = d_ij² / max_k d_ik²``; the few a_ij not among the stored neighbours are
   recomputed from their rows; query expansion averages the k2 nearest rows (sparse product);
4. for a block of queries, the Jaccard term ``1 − S/(2 − S)`` with
   ``S_ij = Σ_k min(V_ik, V_jk)`` is accumulated from the sparse rows (bounded pair
   buffers), and the final distance is ``(1 − λ)·Jaccard + λ·a``.

Memory: O(N·M) neighbours (plus a few pending lists of M candidates per item in the tiled
pass) + nnz(V) (a few hundred per item) + one distance block or tile; no dense N×N array.
Values match the dense formulation to ~1e-7 (float64 arithmetic throughout).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from reidcli.evaluation.backend import NumpyBackend
from reidcli.evaluation.distances import FeatureMetric, check_query_gallery
from reidcli.evaluation.errors import EvaluationError, EvaluationParameterError
from reidcli.params import Interval, check_param
from reidcli.progress import track

if TYPE_CHECKING:                 # scipy.sparse is imported where V is built (it is slow)
    import scipy.sparse as sp

#: distance entries per block of the neighbour pass
_BLOCK_ELEMENTS = 1 << 22
#: (query, gallery) min-pairs per Jaccard chunk
_PAIR_BUDGET = 1 << 23
#: candidate lists an item may hold in the tiled neighbour pass before they are merged
_PENDING_LISTS = 4


@dataclasses.dataclass(frozen=True)
class RerankOptions:
    """k1: reciprocal neighbourhood size; k2: query-expansion size; lambda_value: weight of
    the original distance (paper defaults 20, 6, 0.3)."""

    k1: int = 20
    k2: int = 6
    lambda_value: float = 0.3

    def validate(self) -> None:
        for name in ("k1", "k2"):
            check_param("re-ranking", name, getattr(self, name), Interval(int, 1),
                        todo="use the paper's k1=20, k2=6", error=EvaluationParameterError)
        check_param("re-ranking", "lambda_value", self.lambda_value, Interval(float, 0, 1),
                    todo="use the paper's 0.3", error=EvaluationParameterError)


def _to_numpy(block) -> np.ndarray:
    return block if isinstance(block, np.ndarray) else block.detach().cpu().numpy()


def stable_smallest(values: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``m`` smallest entries in stable order (value, then column).

    values [b, n] → (columns int64 [b, m], values [b, m]). Ties at the cut are filled with
    the lowest columns, as a stable argsort would.
    """
    b, n = values.shape
    m = min(m, n)
    cols = np.argpartition(values, m - 1, axis=1)[:, :m]
    picked = np.take_along_axis(values, cols, axis=1)
    kth = picked.max(axis=1, keepdims=True)
    # rows where the cut falls inside a run of equal values may have picked the wrong ones
    cut_ties = (values == kth).sum(axis=1) > (picked == kth).sum(axis=1)
    if cut_ties.any():
        rows = np.flatnonzero(cut_ties)
        sub = values[rows]
        less = sub < kth[rows]
        need = m - less.sum(axis=1, keepdims=True)
        equal = sub == kth[rows]
        take = less | (equal & (np.cumsum(equal, axis=1) <= need))
        cols[rows] = np.nonzero(take)[1].reshape(len(rows), m)
        picked[rows] = np.take_along_axis(sub, cols[rows], axis=1)
    order = np.lexsort((cols, picked), axis=1)
    return np.take_along_axis(cols, order, axis=1), np.take_along_axis(picked, order, axis=1)


def _reciprocal_mask(neighbours: np.ndarray) -> np.ndarray:
    """``mask[i, s]``: item i is among the neighbours of its neighbour ``neighbours[i, s]``.

    neighbours [N, k] (item i's k nearest, itself included). bool [N, k].
    """
    n, k = neighbours.shape
    out = np.zeros((n, k), dtype=bool)
    step = max(1, _BLOCK_ELEMENTS // (k * k))
    for start in range(0, n, step):
        rows = np.arange(start, min(n, start + step))
        back = neighbours[neighbours[rows]]                # [b, k, k]
        out[rows] = (back == rows[:, None, None]).any(axis=2)
    return out


def expansion_sets(initial: np.ndarray, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """k-reciprocal expansion sets R*(i) of every item as CSR (indptr [N+1], indices).

    initial [N, ≥k1+1]: each item's nearest items in rank order (stable). R(i) = items j
    among i's k1+1 nearest with i among j's k1+1 nearest; for each c ∈ R(i) with
    half-size set Rh(c) (k = round(k1/2)), Rh(c) joins when ``|Rh(c) ∩ R(i)| > 2/3·|Rh(c)|``.
    """
    n = initial.shape[0]
    forward = initial[:, :k1 + 1]
    half = int(np.around(k1 / 2.0))
    half_forward = initial[:, :half + 1]
    in_r = _reciprocal_mask(forward)                       # [N, K1]
    in_rh = _reciprocal_mask(half_forward)                 # [N, H]
    k_full, k_half = forward.shape[1], half_forward.shape[1]
    rows_out, cols_out = [], []
    per_row = k_full * k_half * k_full
    step = max(1, _BLOCK_ELEMENTS // per_row)
    for start in range(0, n, step):
        rows = np.arange(start, min(n, start + step))
        r_set = np.where(in_r[rows], forward[rows], -1)                    # [b, K1]
        cand = forward[rows]                                               # c ∈ F(i)
        cand_rh = np.where(in_rh[cand], half_forward[cand], -2)            # [b, K1, H]
        size_rh = in_rh[cand].sum(axis=2)                                  # [b, K1]
        shared = (cand_rh[..., None] == r_set[:, None, None, :]).any(axis=3).sum(axis=2)
        grow = in_r[rows] & (shared > (2.0 / 3.0) * size_rh)              # c ∈ R(i) only
        members = np.concatenate([r_set, np.where(grow[..., None], cand_rh, -1)
                                  .reshape(len(rows), -1)], axis=1)
        members = np.sort(np.where(members >= 0, members, n), axis=1)
        first = np.ones_like(members, dtype=bool)
        first[:, 1:] = members[:, 1:] != members[:, :-1]
        keep = first & (members < n)
        r_idx, s_idx = np.nonzero(keep)
        rows_out.append(rows[r_idx])
        cols_out.append(members[r_idx, s_idx])
    rows_all = np.concatenate(rows_out)
    cols_all = np.concatenate(cols_out)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows_all, minlength=n), out=indptr[1:])
    return indptr, cols_all.astype(np.int64)


class KReciprocalReranker:
    """Re-ranked query × gallery distances, served a block of query rows at a time.

    metric: a distance metric (``prepare``/``subset``/``pairwise``, see
    :mod:`reidcli.evaluation.distances`); query_features [Q, D], gallery_features [G, D].
    stored_neighbours: neighbours kept per item in the first pass (default 3·(k1+1)); any
    R*(i) member beyond them has its distance recomputed (``recomputed_pairs``; pairwise
    when the metric has ``paired``, else whole rows, counted in ``recomputed_rows``).
    symmetric: compute only the distance tiles on and above the diagonal (d(i, j) = d(j, i));
    None (default) means yes for feature metrics (:class:`FeatureMetric`) or a metric with a
    true ``symmetric`` attribute, whole row blocks otherwise. The two passes keep the same
    neighbours up to float32 rounding: BLAS may round d(i, j) and d(j, i) differently in the
    last bit, which can swap two neighbours at (near-)equal distances.
    ``block(query_pos, gallery_pos)`` → float64 [b, g] final distances.
    """

    def __init__(self, metric, query_features: np.ndarray, gallery_features: np.ndarray,
                 options: RerankOptions = RerankOptions(), progress: bool = False,
                 block_elements: int = _BLOCK_ELEMENTS, stored_neighbours: int | None = None,
                 symmetric: bool | None = None):
        options.validate()
        query_features, gallery_features = check_query_gallery(query_features,
                                                               gallery_features)
        self.metric = metric
        self._cpu = NumpyBackend()        # threads for the row partitions
        self.options = options
        self.progress = progress
        self.block_elements = block_elements
        self.num_query = len(query_features)
        self.num_gallery = len(gallery_features)
        self.points = metric.prepare(np.concatenate([query_features, gallery_features]))
        n = self.num_query + self.num_gallery
        k1, k2 = options.k1, options.k2
        # neighbours kept per item: enough for most of R*(i); the rest is recomputed
        self.num_neighbours = min(n, max(stored_neighbours or 3 * (k1 + 1), k1 + 1, k2))
        self.recomputed_pairs = 0
        self.recomputed_rows = 0
        if symmetric is None:
            symmetric = bool(getattr(metric, "symmetric", isinstance(metric, FeatureMetric)))
        self.symmetric = symmetric
        if symmetric:
            self._neighbour_pass_tiles()
        else:
            self._neighbour_pass()
        if self.initial.shape[1] < min(n, k1 + 1):
            raise EvaluationParameterError("re-ranking", "k1", k1,
                                           f"needs at least k1+1 = {k1 + 1} items, there are {n}",
                                           "lower k1")
        indptr, members = expansion_sets(self.initial, k1)
        self.V = self._weights(indptr, members)
        if k2 != 1:
            self.V = self._query_expansion(self.V, k2)
        v_gallery = self.V[self.num_query:]
        #: gallery rows of V transposed: column k → (gallery j, V[j, k])
        self.v_gallery_by_column = v_gallery.T.tocsr()
        self.v_query = self.V[:self.num_query]
        self._cpu.close()

    # -- pass 1: neighbours and row maxima ----------------------------------------------------
    def _distances(self, rows: np.ndarray, cols: slice | None = None) -> np.ndarray:
        """Distances of items ``rows`` to all items (or the ``cols`` slice), as returned by
        the metric (float32 for features), checked for NaN through the row maxima."""
        other = self.points if cols is None else self.metric.subset(self.points, cols)
        d = _to_numpy(self.metric.pairwise(self.metric.subset(self.points, rows), other))
        return d

    def _rows(self, rows: np.ndarray, cols: slice | None = None) -> np.ndarray:
        """Squared distances (float64) of items ``rows`` to all items (or ``cols``)."""
        d = self._distances(rows, cols)
        if np.isnan(d.max()) if d.size else False:
            raise EvaluationError("re-ranking: distances hold NaN values",
                                  "check the features or model")
        return np.square(d, dtype=np.float64)

    def _neighbour_pass(self) -> None:
        """Each item's ``num_neighbours`` nearest items by squared distance (stable) and
        the row maxima of the squared distances."""
        n = self.num_query + self.num_gallery
        m = self.num_neighbours
        self.initial = np.empty((n, m), dtype=np.int64)
        self.initial_sq = np.empty((n, m), dtype=np.float64)
        self.row_max = np.empty(n, dtype=np.float64)
        step = max(1, self.block_elements // max(n, 1))
        starts = range(0, n, step)
        for start in track(starts, description="re-ranking: neighbours", unit="blocks",
                           enabled=self.progress and len(starts) > 1):
            rows = np.arange(start, min(n, start + step))
            d = self._distances(rows)
            high, low = d.max(axis=1), d.min(axis=1)
            if np.isnan(high).any():
                raise EvaluationError("re-ranking: distances hold NaN values",
                                      "check the features or model")
            self.row_max[rows] = np.maximum(np.square(high, dtype=np.float64),
                                            np.square(low, dtype=np.float64))
            # for d ≥ 0 the order of d is the order of d² (exact in float64): rank d itself
            key = d if low.min() >= 0 else np.square(d, dtype=np.float64)
            cols = np.concatenate(self._cpu.map_row_chunks(
                lambda part: stable_smallest(part, m)[0], key))
            self.initial[rows] = cols
            self.initial_sq[rows] = np.square(np.take_along_axis(d, cols, axis=1),
                                              dtype=np.float64)
            del d, key
        self.row_max = np.where(self.row_max > 0, self.row_max, 1.0)

    def _neighbour_pass_tiles(self) -> None:
        """As :meth:`_neighbour_pass` for a symmetric metric, from the tiles [I, J], J ≥ I,
        of a tiling of the N×N distances into T×T tiles (T² ≈ ``block_elements``).

        Tile [I, J] yields each row of I its ``M`` nearest among the columns J and, read
        transposed, each row of J its ``M`` nearest among I. An item's candidate lists arrive
        in increasing column order (tiles [K, J] for K < J, then [J, K] for K ≥ J), so a
        stable sort of their squared distances ranks ties by index, as the row pass does.
        Memory: one tile plus at most ``_PENDING_LISTS`` + 1 lists of ``M`` per item.
        """
        n = self.num_query + self.num_gallery
        m = self.num_neighbours
        size = max(1, int(np.sqrt(self.block_elements)))
        bounds = list(range(0, n, size)) + [n]
        blocks = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
        self.initial = np.empty((n, m), dtype=np.int64)
        self.initial_sq = np.empty((n, m), dtype=np.float64)
        high = np.full(n, -np.inf)
        low = np.full(n, np.inf)
        pending: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in blocks]
        tiles = [(i, j) for i in range(len(blocks)) for j in range(i, len(blocks))]
        for i, j in track(tiles, description="re-ranking: neighbours", unit="tiles",
                          enabled=self.progress and len(tiles) > 1):
            rows, cols = blocks[i], blocks[j]
            d = _to_numpy(self.metric.pairwise(self.metric.subset(self.points, rows),
                                               self.metric.subset(self.points, cols)))
            if d.size and np.isnan(d.max()):
                raise EvaluationError("re-ranking: distances hold NaN values",
                                      "check the features or model")
            # for d ≥ 0 the order of d is the order of d² (exact in float64): rank d itself
            key = d if d.min() >= 0 else np.square(d, dtype=np.float64)
            high[rows] = np.maximum(high[rows], d.max(axis=1))
            low[rows] = np.minimum(low[rows], d.min(axis=1))
            self._add_candidates(pending, i, self._tile_candidates(d, key, cols.start))
            if j != i:
                high[cols] = np.maximum(high[cols], d.max(axis=0))
                low[cols] = np.minimum(low[cols], d.min(axis=0))
                d_t = np.ascontiguousarray(d.T)
                key_t = d_t if key is d else np.ascontiguousarray(key.T)
                self._add_candidates(pending, j, self._tile_candidates(d_t, key_t, rows.start))
                del d_t, key_t
            del d, key
            if j == len(blocks) - 1:                      # row block i is complete
                cand, sq = _merge_candidates(pending[i], m)
                pending[i] = []
                self.initial[rows], self.initial_sq[rows] = cand, sq
        self.row_max = np.maximum(np.square(high), np.square(low))
        self.row_max = np.where(self.row_max > 0, self.row_max, 1.0)

    def _add_candidates(self, pending: list, block: int,
                        candidates: tuple[np.ndarray, np.ndarray]) -> None:
        """Append a candidate list to a row block's pending lists, merging them into one
        when there are more than ``_PENDING_LISTS``."""
        pending[block].append(candidates)
        if len(pending[block]) > _PENDING_LISTS:
            pending[block] = [_merge_candidates(pending[block], self.num_neighbours)]

    def _tile_candidates(self, d: np.ndarray, key: np.ndarray, offset: int
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Each row's ``M`` nearest columns of a tile d [b, t] ranked by ``key`` (stable):
        (item indices int64 [b, ≤M] = column + offset, squared distances float64 [b, ≤M])."""
        cols = np.concatenate(self._cpu.map_row_chunks(
            lambda part: stable_smallest(part, self.num_neighbours)[0], key))
        return cols + offset, np.square(np.take_along_axis(d, cols, axis=1), dtype=np.float64)

    # -- V -----------------------------------------------------------------------------------
    def _weights(self, indptr: np.ndarray, members: np.ndarray) -> sp.csr_matrix:
        """Sparse V: row i holds exp(−a_ij) over R*(i), normalised to sum 1."""
        import scipy.sparse as sp
        n, m = self.initial.shape
        rows = np.repeat(np.arange(n), np.diff(indptr))
        sq = np.full(len(members), np.nan)
        # look each (i, j) up among i's stored neighbours
        key_stored = (np.arange(n)[:, None] * n + self.initial).reshape(-1)
        order = np.argsort(key_stored, kind="stable")
        key_sorted = key_stored[order]
        key_want = rows * n + members
        pos = np.searchsorted(key_sorted, key_want)
        pos = np.minimum(pos, len(key_sorted) - 1)
        found = key_sorted[pos] == key_want
        sq[found] = self.initial_sq.reshape(-1)[order[pos[found]]]
        missing = np.flatnonzero(~found)
        if len(missing):
            self.recomputed_pairs = len(missing)
            sq[missing] = self._pair_squares(rows[missing], members[missing])
        a = sq / self.row_max[rows]
        w = np.exp(-a)
        sums = np.bincount(rows, weights=w, minlength=n)
        w = w / sums[rows]
        return sp.csr_matrix((w, members, indptr), shape=(n, n))

    def _query_expansion(self, V: sp.csr_matrix, k2: int) -> sp.csr_matrix:
        """Row i ← mean of the rows of its k2 nearest items (itself included)."""
        import scipy.sparse as sp
        n = V.shape[0]
        k2 = min(k2, self.initial.shape[1])
        avg = sp.csr_matrix((np.full(n * k2, 1.0 / k2), self.initial[:, :k2].reshape(-1),
                             np.arange(0, n * k2 + 1, k2)), shape=(n, n))
        out = (avg @ V).tocsr()
        out.sum_duplicates()
        out.sort_indices()
        return out

    def _pair_squares(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Squared distances of item pairs (a[i], b[i]) — from the metric's ``paired`` when it
        has one, else from the full rows of the items in ``a``."""
        paired = getattr(self.metric, "paired", None)
        out = np.empty(len(a), dtype=np.float64)
        if paired is not None:
            step = max(1, self.block_elements // 64)
            for s in range(0, len(a), step):
                d = _to_numpy(paired(self.metric.subset(self.points, a[s:s + step]),
                                     self.metric.subset(self.points, b[s:s + step])))
                out[s:s + step] = np.square(d, dtype=np.float64)
            return out
        n = self.num_query + self.num_gallery
        rows = np.unique(a)
        self.recomputed_rows = len(rows)
        step = max(1, self.block_elements // max(n, 1))
        for start in range(0, len(rows), step):
            block_rows = rows[start:start + step]
            block = self._rows(block_rows)
            sel = np.flatnonzero(np.isin(a, block_rows))
            out[sel] = block[np.searchsorted(block_rows, a[sel]), b[sel]]
        return out

    # -- final distances ---------------------------------------------------------------------
    def jaccard_overlap(self, query_pos: np.ndarray) -> np.ndarray:
        """S[i, j] = Σ_k min(V_qi,k, V_gj,k) for queries ``query_pos`` × all gallery. [b, G]."""
        vq = self.v_query[query_pos]
        vg = self.v_gallery_by_column
        ng = self.num_gallery
        out = np.zeros((len(query_pos), ng), dtype=np.float64)
        col_len = np.diff(vg.indptr)
        entry_rows = np.repeat(np.arange(vq.shape[0]), np.diff(vq.indptr))
        pairs_per_entry = col_len[vq.indices]
        pairs_per_row = np.bincount(entry_rows, weights=pairs_per_entry,
                                    minlength=vq.shape[0])
        bounds = _chunk_bounds(pairs_per_row, _PAIR_BUDGET)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            e_lo, e_hi = vq.indptr[lo], vq.indptr[hi]
            k = vq.indices[e_lo:e_hi]
            v = vq.data[e_lo:e_hi]
            r = entry_rows[e_lo:e_hi] - lo
            counts = col_len[k]
            total = int(counts.sum())
            if total == 0:
                continue
            starts = np.repeat(vg.indptr[k] - np.cumsum(counts) + counts, counts)
            pos = starts + np.arange(total)
            contrib = np.minimum(np.repeat(v, counts), vg.data[pos])
            flat = np.repeat(r, counts) * ng + vg.indices[pos]
            out[lo:hi] = np.bincount(flat, weights=contrib,
                                     minlength=(hi - lo) * ng).reshape(hi - lo, ng)
        return out

    def block(self, query_pos: np.ndarray, gallery_pos: np.ndarray | None = None) -> np.ndarray:
        query_pos = np.asarray(query_pos, dtype=np.int64)
        lam = self.options.lambda_value
        final = self.jaccard_overlap(query_pos)                 # S
        final /= 2.0 - final                                     # S / (2 − S)
        np.subtract(1.0, final, out=final)                       # Jaccard distance
        final *= 1.0 - lam
        original = self._rows(query_pos, slice(self.num_query, None))
        original /= self.row_max[query_pos][:, None]
        original *= lam
        final += original
        del original
        return final if gallery_pos is None else np.ascontiguousarray(final[:, gallery_pos])


def _merge_candidates(lists: list[tuple[np.ndarray, np.ndarray]], m: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The ``m`` nearest of several candidate lists of the same rows, ties by index.

    lists: (items int64 [b, k_l], squared distances float64 [b, k_l]), each sorted by
    (distance, item), in increasing item order from one list to the next — so a stable sort
    on the distances alone ranks ties by item. → (items [b, ≤m], squared distances [b, ≤m]).
    """
    if len(lists) == 1:
        items, sq = lists[0]
        return items[:, :m], sq[:, :m]
    items = np.concatenate([c for c, _ in lists], axis=1)
    sq = np.concatenate([v for _, v in lists], axis=1)
    order = np.argsort(sq, axis=1, kind="stable")[:, :m]
    return np.take_along_axis(items, order, axis=1), np.take_along_axis(sq, order, axis=1)


def _chunk_bounds(cost_per_row: np.ndarray, budget: float) -> np.ndarray:
    """Row boundaries [0, ..., n] cutting rows into chunks whose summed cost stays below
    ``budget`` plus one row's cost."""
    n = len(cost_per_row)
    if n == 0:
        return np.array([0, 0])
    cost_before = np.cumsum(cost_per_row) - cost_per_row
    chunk = np.floor(cost_before / max(budget, 1.0)).astype(np.int64)
    cuts = np.flatnonzero(np.diff(chunk)) + 1
    return np.concatenate([[0], cuts, [n]])
