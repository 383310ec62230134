"""Score one trial: stream query blocks through distances → ranks → per-query metrics.

``evaluate_trial(distances, labels, protocol, options)`` walks the protocol's groups, asks the
distance source for a block of rows at a time (``block_rows`` × gallery, bounded memory),
ranks the block's positives (:mod:`reidcli.evaluation.ranking`) and keeps only per-query
numbers (first-positive rank, AP, INP). The curves and means are made from those at the end.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from reidcli.evaluation import ranking, sgs
from reidcli.evaluation.backend import NumpyBackend
from reidcli.evaluation.errors import EvaluationError, EvaluationParameterError
from reidcli.evaluation.protocols import (SKIP_JUNK_QUERY, SKIP_NO_MATCH, Protocol,
                                          TrialLabels, make_groups, scorable_queries)
from reidcli.evaluation.scores import cmc_auc, pur
from reidcli.naming import param
from reidcli.numeric import distinct
from reidcli.params import NONE, SEED, Interval, Options, check_param
from reidcli.progress import track

#: status of queries left out by the query-camera selection (query_cams) (neither scored nor counted as skipped)
NOT_SELECTED = "not_selected"

#: longest CMC curve reported past the gallery's own ranks: CMC(k) is flat beyond the full
#: curve's length, so a ``max_rank`` above both this and that length is an error rather than a
#: huge flat tail (``--max-rank 2000000000`` would allocate gigabytes)
MAX_PADDED_RANK = 10_000

#: default distance entries per block (2^23 float32 = 32 MiB per [b, g] array; the ranking
#: holds that block, reused from block to block, and a [b, g] bool mask). Measured on 2 cores
#: (docs/performance.md): 2^23 beats 2^24 and 2^25 (fresh pages cost more than the extra GEMM
#: calls) and 2^22 (GEMMs of a few hundred rows run slower)
DEFAULT_BLOCK_ELEMENTS = 1 << 23

#: default bytes of float32 gallery features per block of a streamed gallery (two blocks are
#: held at once: the one being ranked and the next one being read)
DEFAULT_GALLERY_BLOCK_BYTES = 128 << 20


@dataclasses.dataclass
class EvalOptions:
    """Options of one evaluation (CLI names in brackets)."""

    max_rank: int = 50                       # --max-rank
    ap_convention: str = "sum-of-precisions"  # --ap
    full_curve: bool = False                 # --full-cmc (always on for single-shot)
    block_rows: int = 0                      # --block-size (0 = from DEFAULT_BLOCK_ELEMENTS)
    sgs_repeats: int = 10                    # --sgs-repeats (E2)
    seed: int = 0                            # --seed (E2 sampling)
    per_camera: bool = False                 # --per-camera
    query_cameras: list[int] | None = None   # --query-cams / camera-split
    auc_max_rank: int | None = None          # --auc-max-rank (default: gallery size)
    progress: bool = False
    #: gallery rows per block read from the store when the gallery is streamed
    #: (0: as many as fit DEFAULT_GALLERY_BLOCK_BYTES of float32 features)
    gallery_block_rows: int = 0

    def __post_init__(self) -> None:
        """Validate the values (EvaluationParameterError naming the parameter), so Python
        callers get the same checks as the command line."""
        def check(name: str, *constraints, todo: str):
            return check_param("evaluation", name, getattr(self, name), *constraints,
                               todo=todo, error=EvaluationParameterError)

        self.ap_convention = check("ap_convention", Options(ranking.AP_CONVENTIONS),
                                   todo="sum-of-precisions: torchreid/fast-reid; "
                                   "market-official: the Market-1501 trapezoid")
        self.max_rank = check("max_rank", Interval(int, 1),
                              todo="e.g. 50 (the CMC curve's length)")
        self.block_rows = check("block_rows", Interval(int, 0),
                                todo="use 0 (rows from the default block budget)")
        # E2 keeps a rank per query and repeat ([Q, repeats] int64): bounded so a typo
        # cannot allocate terabytes
        self.sgs_repeats = check("sgs_repeats", Interval(int, 1, 10_000),
                                 todo="use the default 10")
        self.gallery_block_rows = check("gallery_block_rows", Interval(int, 0),
                                        todo="use 0 (rows from the default budget)")
        self.seed = check("seed", SEED, todo="use an integer seed in [0, 2**32)")
        self.auc_max_rank = check("auc_max_rank", Interval(int, 1), NONE,
                                  todo="give a positive rank or none (gallery size)")

    def gallery_rows_per_block(self, dim: int) -> int:
        """Gallery rows per block of a streamed gallery of ``dim``-dimensional features."""
        if self.gallery_block_rows > 0:
            return self.gallery_block_rows
        return max(1024, DEFAULT_GALLERY_BLOCK_BYTES // (4 * max(dim, 1)))

    def rows_per_block(self, num_columns: int, num_rows: int | None = None) -> int:
        """Query rows per distance block of ``num_columns`` gallery columns: ``block_rows``,
        else as many as fit :data:`DEFAULT_BLOCK_ELEMENTS`, evened out over ``num_rows``
        rows when given (3,368 rows in blocks of 527 → 7 blocks of ≤ 482, not a last block
        of 206 rows that runs its GEMM slower)."""
        if self.block_rows > 0:
            return self.block_rows
        step = max(1, DEFAULT_BLOCK_ELEMENTS // max(num_columns, 1))
        if num_rows:
            step = -(-num_rows // -(-num_rows // step))        # ⌈n / ⌈n / step⌉⌉
        return step


@dataclasses.dataclass
class QueryOutcomes:
    """Per-query results of one trial ([Q] arrays; NaN / -1 where the query is skipped)."""

    status: np.ndarray          # "" valid, else a skip reason
    camera: np.ndarray          # query camera code (labels.cameras: a camera is (domain, camid))
    first_rank: np.ndarray      # 0-based rank of the first positive (after removal)
    ap: np.ndarray
    inp: np.ndarray
    num_positives: np.ndarray
    sgs_ranks: np.ndarray | None = None   # [Q, repeats] (E2)
    cameras: Any = None                    # the CameraTable of ``camera``

    @property
    def valid(self) -> np.ndarray:
        return self.status == ""


@dataclasses.dataclass
class TrialResult:
    """Metrics of one trial; every metric a fraction in [0, 1] (None when undefined)."""

    trial: int
    num_queries: int
    num_valid_queries: int
    skipped: dict[str, int]
    gallery_size: int
    cmc: np.ndarray
    mAP: float | None
    mINP: float | None
    cmc_full: np.ndarray | None = None
    pur: float | None = None
    auc: float | None = None
    per_camera: dict[str, dict[str, Any]] | None = None
    outcomes: QueryOutcomes | None = None
    #: fit index within the trial for models fitted several times per trial, else None
    repeat: int | None = None
    #: gallery images and identities (junk excluded); ``gallery_size`` above is the full
    #: curve's length, identities where the protocol de-duplicates the CMC (E4)
    gallery_images: int | None = None
    gallery_ids: int | None = None


def to_backend(backend, block):
    """A distance block on the backend: a NumPy block becomes a tensor on a torch backend's
    device; anything else is returned as it is."""
    if not backend.is_torch or not isinstance(block, np.ndarray):
        return block
    import torch
    return torch.from_numpy(block).to(backend.device)


def evaluate_trial(distances, labels: TrialLabels, protocol: Protocol,
                   options: EvalOptions | None = None, backend=None, trial: int = 0,
                   check_distances: bool = False) -> TrialResult:
    """Score one trial.

    distances: object with ``block(query_pos [b], gallery_pos [g] | None) -> [b, g]``
    (:class:`~reidcli.evaluation.distances.QueryGallery`, ``MatrixDistances``, a re-ranker);
    one whose ``fills_out`` is true also takes ``out=`` (a float32 [b, g] buffer this
    engine reuses from block to block; the block returned is used).
    labels: the trial's query [Q] / gallery [G] labels.
    check_distances: test every block for NaN (for distances not derived from checked
    features).
    """
    options = options or EvalOptions()
    labels.validate()
    check_max_rank(options.max_rank, curve_length(protocol, labels), trial)
    own_backend = backend is None
    backend = backend or NumpyBackend()
    try:
        outcomes = _score_queries(distances, labels, protocol, options, backend, trial,
                                  check_distances)
    finally:
        if own_backend:
            backend.close()
    return summarize_trial(outcomes, labels, protocol, options, trial)


def check_max_rank(max_rank: int, length: int, trial: int = 0) -> None:
    """EvaluationParameterError when ``max_rank`` exceeds both the trial's ``length`` ranks
    and :data:`MAX_PADDED_RANK` (before anything is ranked or allocated)."""
    if max_rank > max(length, MAX_PADDED_RANK):
        raise EvaluationParameterError(
            "evaluation", "max_rank", max_rank,
            f"exceeds the {length} ranks of trial {trial}'s gallery",
            f"give at most {max(length, MAX_PADDED_RANK)} (the CMC curve is flat past rank "
            f"{length})")


def _query_mask(labels: TrialLabels, options: EvalOptions) -> np.ndarray:
    if options.query_cameras is None:
        return np.ones(labels.num_queries, dtype=bool)
    return np.isin(labels.query_cams, options.query_cameras)


def new_outcomes(labels: TrialLabels, protocol: Protocol, options: EvalOptions
                 ) -> tuple[QueryOutcomes, np.ndarray]:
    """Empty outcomes of a trial (every query unmatched, junk or not selected) and the
    query-camera selection mask [Q]."""
    nq = labels.num_queries
    selected = _query_mask(labels, options)
    status = np.full(nq, SKIP_NO_MATCH, dtype=object)
    status[~scorable_queries(labels)] = SKIP_JUNK_QUERY
    status[~selected] = NOT_SELECTED
    out = QueryOutcomes(status=status, camera=labels.query_camera.copy(),
                        cameras=labels.cameras,
                        first_rank=np.full(nq, -1, dtype=np.int64), ap=np.full(nq, np.nan),
                        inp=np.full(nq, np.nan), num_positives=np.zeros(nq, dtype=np.int64),
                        sgs_ranks=np.full((nq, options.sgs_repeats), -1, dtype=np.int64)
                        if protocol.single_gallery_shot else None)
    return out, selected


def store_block_metrics(out: QueryOutcomes, qpos: np.ndarray, block_ranks, ap_convention: str,
                        first: np.ndarray | None = None) -> None:
    """Write the first rank, AP, INP and positives of the queries ``qpos`` [b] from their
    :class:`~reidcli.evaluation.ranking.BlockRanks` (``first``: de-duplicated first ranks)."""
    out.first_rank[qpos] = ranking.first_positive_rank(block_ranks) if first is None else first
    out.ap[qpos] = ranking.average_precision(block_ranks, ap_convention)
    out.inp[qpos] = ranking.inverse_negative_penalty(block_ranks)
    out.num_positives[qpos] = block_ranks.num_positives
    out.status[qpos[block_ranks.positive.any(axis=1)]] = ""


def _score_queries(distances, labels: TrialLabels, protocol: Protocol, options: EvalOptions,
                   backend, trial: int, check_distances: bool) -> QueryOutcomes:
    out, selected = new_outcomes(labels, protocol, options)
    groups = make_groups(protocol, labels)
    indexes = [ranking.IdentityIndex(labels.gallery_ids[g.gallery_pos]) for g in groups]
    jobs = []
    for group, index in zip(groups, indexes):
        if len(group.gallery_pos) == 0:          # nothing to rank: its queries have no match
            continue
        queries = group.query_pos[selected[group.query_pos]]
        step = options.rows_per_block(len(group.gallery_pos), len(queries))
        jobs.extend((group, index, queries[s:s + step]) for s in range(0, len(queries), step))
    reused = np.empty(max((len(q) * len(g.gallery_pos) for g, _, q in jobs), default=0),
                      dtype=np.float32) \
        if getattr(distances, "fills_out", False) and not backend.is_torch else None
    for group, index, qpos in track(jobs, description="ranking query blocks", unit="blocks",
                                    enabled=options.progress and len(jobs) > 1):
        if reused is None:
            block = to_backend(backend, distances.block(qpos, group.gallery_pos))
        else:
            shape = (len(qpos), len(group.gallery_pos))
            block = distances.block(qpos, group.gallery_pos,
                                    out=reused[:shape[0] * shape[1]].reshape(shape))
        if tuple(block.shape) != (len(qpos), len(group.gallery_pos)):
            raise EvaluationError(f"distance block has shape {tuple(block.shape)}, expected "
                                  f"{(len(qpos), len(group.gallery_pos))}",
                                  "the distance source is faulty")
        if check_distances and backend.has_nan(block):
            raise EvaluationError("distances hold NaN values", "check the features or model")
        if protocol.single_gallery_shot:
            _score_sgs_block(out, block, qpos, group.gallery_pos, index, labels, options,
                             backend, trial)
        else:
            _score_block(out, block, qpos, group.gallery_pos, index, labels, protocol,
                         options, backend)
    return out


def _score_block(out: QueryOutcomes, block, qpos: np.ndarray, gpos: np.ndarray,
                 index: ranking.IdentityIndex, labels: TrialLabels, protocol: Protocol,
                 options: EvalOptions, backend) -> None:
    """Rank one block [b, g] and store its queries' first rank, AP, INP (E1/E3/E4/E5)."""
    cols, present, segment = index.columns_of(labels.query_ids[qpos])
    removed = np.zeros_like(present)
    if protocol.same_camera_removal:
        removed = present & (labels.gallery_camera[gpos][cols]
                             == labels.query_camera[qpos][:, None])
    block_ranks = ranking.rank_specials(backend, block, cols, present, removed)
    first = ranking.deduplicated_first_rank(backend.to_numpy(block), index, segment,
                                            block_ranks) if protocol.deduplicate_cmc else None
    store_block_metrics(out, qpos, block_ranks, options.ap_convention, first)


def _score_sgs_block(out: QueryOutcomes, block, qpos: np.ndarray, gpos: np.ndarray,
                     index: ranking.IdentityIndex, labels: TrialLabels, options: EvalOptions,
                     backend, trial: int) -> None:
    """E2: sampled single-gallery-shot ranks of one block's queries."""
    segment = index.segment_of(labels.query_ids[qpos])
    same_id = labels.gallery_ids[gpos][None, :] == labels.query_ids[qpos][:, None]
    same_cam = labels.gallery_camera[gpos][None, :] == labels.query_camera[qpos][:, None]
    ranks = sgs.single_gallery_shot_ranks(backend.to_numpy(block), index, segment,
                                          ~(same_id & same_cam), qpos, trial,
                                          options.sgs_repeats, options.seed)
    ok = ranks[:, 0] >= 0
    out.sgs_ranks[qpos] = ranks
    out.first_rank[qpos] = np.where(ok, ranks[:, 0], -1)
    out.status[qpos[ok]] = ""


# -- aggregation ---------------------------------------------------------------------------
def curve_length(protocol: Protocol, labels: TrialLabels) -> int:
    """Length of the full CMC curve: gallery size (identities for de-duplicated CMC)."""
    kept = labels.gallery_pids != -1
    if protocol.deduplicate_cmc or protocol.single_gallery_shot:
        return int(len(distinct(labels.gallery_ids[kept])))
    return int(kept.sum())


def _first_ranks(outcomes: QueryOutcomes, mask: np.ndarray) -> np.ndarray:
    """First-positive ranks of the masked valid queries (all repeats for E2), flattened."""
    if outcomes.sgs_ranks is not None:
        return outcomes.sgs_ranks[mask].reshape(-1)
    return outcomes.first_rank[mask]


def summarize_trial(outcomes: QueryOutcomes, labels: TrialLabels, protocol: Protocol,
                    options: EvalOptions, trial: int = 0) -> TrialResult:
    """Curves and means of one trial's per-query outcomes."""
    valid = outcomes.valid
    selected = outcomes.status != NOT_SELECTED
    n_valid = int(valid.sum())
    if selected.sum() == 0:
        raise EvaluationError(f"trial {trial}: the query set is empty",
                              f"check the store's query rows, {param('trials')} and "
                              f"{param('query_cams')}")
    if n_valid == 0:
        raise EvaluationError(f"trial {trial}: none of its {int(selected.sum())} queries has a "
                              "match in the gallery",
                              f"check the protocol ({param('protocol')}) and that query and gallery share "
                              "identities")
    skipped = {reason: int((outcomes.status == reason).sum())
               for reason in (SKIP_NO_MATCH, SKIP_JUNK_QUERY)}
    length = curve_length(protocol, labels)
    firsts = _first_ranks(outcomes, valid)
    cmc = ranking.cmc_curve(firsts, options.max_rank)
    want_full = options.full_curve or protocol.full_curve
    full = ranking.cmc_curve(firsts, max(length, 1)) if want_full else None
    result = TrialResult(
        trial=trial, num_queries=int(selected.sum()), num_valid_queries=n_valid,
        skipped=skipped, gallery_size=length, cmc=cmc,
        mAP=float(np.mean(outcomes.ap[valid])) if protocol.has_map else None,
        mINP=float(np.mean(outcomes.inp[valid])) if protocol.has_map else None,
        cmc_full=full, outcomes=outcomes)
    kept = labels.gallery_pids != -1
    result.gallery_images = int(kept.sum())
    result.gallery_ids = int(len(distinct(labels.gallery_ids[kept])))
    if full is not None:
        result.pur = pur(full, length)
        result.auc = cmc_auc(full, options.auc_max_rank)
    if options.per_camera or protocol.per_camera:
        result.per_camera = per_camera_breakdown(outcomes, protocol, options)
    return result


def per_camera_breakdown(outcomes: QueryOutcomes, protocol: Protocol,
                         options: EvalOptions) -> dict[str, dict[str, Any]]:
    """mAP / mINP / rank-1 / rank-5 per query camera and their mean weighted by valid queries.

    A camera is (domain, camid); its key is the camid (``"3"``) when the trial's cameras are of
    one domain, else ``"<domain>/<camid>"`` (:meth:`reidcli.cameras.CameraTable.key`). The
    weighted mean equals the metric over the union of those queries; that identity is
    checked (to 1e-9) as a guard against bookkeeping errors.
    """
    valid = outcomes.valid
    cams = distinct(outcomes.camera[valid])
    keys = [outcomes.cameras.key(int(c)) if outcomes.cameras is not None else str(int(c))
            for c in cams]
    table: dict[str, dict[str, Any]] = {}
    for cam, name in zip(cams, keys):
        mask = valid & (outcomes.camera == cam)
        table[name] = _metrics_of(outcomes, mask, protocol)
    weights = np.array([table[k]["num_valid_queries"] for k in keys], dtype=float)
    weighted: dict[str, Any] = {"num_valid_queries": int(weights.sum())}
    for key in ("mAP", "mINP", "rank1", "rank5"):
        values = [table[k][key] for k in keys]
        weighted[key] = None if any(v is None for v in values) else \
            float(np.dot(weights, values) / weights.sum())
    union = _metrics_of(outcomes, valid, protocol)
    for key in ("mAP", "mINP", "rank1", "rank5"):
        if weighted[key] is not None and abs(weighted[key] - union[key]) > 1e-9:
            raise AssertionError(f"per-camera weighted {key} {weighted[key]} differs from the "
                                 f"union {union[key]}")
    return {"cameras": table, "weighted_mean": weighted}


def _metrics_of(outcomes: QueryOutcomes, mask: np.ndarray, protocol: Protocol) -> dict:
    firsts = _first_ranks(outcomes, mask)
    cmc = ranking.cmc_curve(firsts, 5)
    return {"num_valid_queries": int(mask.sum()),
            "mAP": float(np.mean(outcomes.ap[mask])) if protocol.has_map else None,
            "mINP": float(np.mean(outcomes.inp[mask])) if protocol.has_map else None,
            "rank1": float(cmc[0]), "rank5": float(cmc[4])}
