"""Evaluation protocols (docs/datasets.md, DART3 setting A) as data: who is a query, which
gallery entries each query sees, and which metrics are reported.

A protocol turns one trial's query and gallery labels into *groups*: a set of queries and the
gallery columns all of them see (junk is dropped from every group; SYSU's same-location
cameras are dropped per query location). Identity-specific removal (same id and camera, E1)
happens later in the ranking, per query.

A camera is the pair (domain, camid) (:mod:`reidcli.cameras`): :class:`TrialLabels` carries
each row's camera code for removal and per-camera metrics, and its camid for what is named by
camid — SYSU locations and ``query_cams`` / ``train_cams``, which apply within every domain.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - record tables come from the store reader
    from typing import Mapping

    import pandas as pd

    #: a record table: a DataFrame, or a mapping of column name → array [N] (a store's
    #: ``record_columns``: no pandas)
    RecordTable = pd.DataFrame | Mapping[str, np.ndarray]

from reidcli.cameras import CameraTable, camera_codes, record_cameras
from reidcli.evaluation.errors import EvaluationError, EvaluationParameterError
from reidcli.naming import param
from reidcli.numeric import distinct

JUNK_PID = -1
DISTRACTOR_PID = 0

#: SYSU-MM01 camera (1-based) → location; cams 2 and 3 share a room (docs/datasets.md)
SYSU_LOCATION = {1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}

#: datasets evaluated with the single-shot rule E3 (full CMC, PUR, AUC) under --protocol auto
SINGLE_SHOT_DATASETS = frozenset({"viper", "grid", "prid450s", "prid2011", "cuhk01", "ilids"})


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How one trial is scored.

    same_camera_removal: E1 — drop gallery entries of the query's id *and* camera.
    sysu_locations: E4 — drop gallery entries at the query's location (cam 3 skips cam 2).
    deduplicate_cmc: E4 — CMC on the ranked list with each identity at its first occurrence.
    single_gallery_shot: E2 — CMC averaged over sampled one-image-per-identity galleries.
    full_curve: E3 — keep the full CMC curve and report PUR and CMC-AUC.
    per_camera: report per-query-camera metrics and their weighted mean.
    needs_query_cams: queries are restricted to chosen (unseen) cameras.
    """

    name: str
    rule: str
    same_camera_removal: bool = True
    sysu_locations: bool = False
    deduplicate_cmc: bool = False
    single_gallery_shot: bool = False
    full_curve: bool = False
    per_camera: bool = False
    needs_query_cams: bool = False

    @property
    def has_map(self) -> bool:
        return not self.single_gallery_shot


PROTOCOLS: dict[str, Protocol] = {
    "market": Protocol("market", "E1"),
    "cuhk03_sgs": Protocol("cuhk03_sgs", "E2", single_gallery_shot=True),
    "single-shot": Protocol("single-shot", "E3", full_curve=True),
    # E3 without same-camera removal: any other image of the probe's person is a match (the
    # WARCA protocol on sets Xiong et al. ran without camera labels; docs/datasets.md)
    "single-shot-any": Protocol("single-shot-any", "E3 (same-camera matches kept)",
                                same_camera_removal=False, full_curve=True),
    "sysu": Protocol("sysu", "E4", same_camera_removal=False, sysu_locations=True,
                     deduplicate_cmc=True),
    "regdb": Protocol("regdb", "E5", same_camera_removal=False),
    "camera-split": Protocol("camera-split", "E1 (DART3 setting A)", per_camera=True,
                             needs_query_cams=True),
}
_ALIASES = {"single_shot": "single-shot", "singleshot": "single-shot", "cuhk03-sgs":
            "cuhk03_sgs", "cuhk03": "cuhk03_sgs", "camera_split": "camera-split",
            "sysu_mm01": "sysu", "e1": "market", "e2": "cuhk03_sgs", "e3": "single-shot",
            "e4": "sysu", "e5": "regdb",
            "single_shot_any": "single-shot-any"}
#: eval_rule values written into stores (docs/datasets.md) → protocol
_STORE_RULES = {"market": "market", "cuhk03_sgs": "cuhk03_sgs", "sysu": "sysu",
                "regdb": "regdb", "single_shot": "single-shot", "single-shot": "single-shot",
                "single_shot_any": "single-shot-any", "single-shot-any": "single-shot-any"}


def protocol_names() -> list[str]:
    return ["auto", *PROTOCOLS]


def get_protocol(name: str) -> Protocol:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in PROTOCOLS:
        raise EvaluationParameterError("evaluation", "protocol", name, "is unknown",
                              f"use one of {', '.join(protocol_names())}")
    return PROTOCOLS[key]


def auto_protocol(dataset: str | None, store_rule: str | None, num_trials: int) -> Protocol:
    """``--protocol auto``: the store's evaluation rule, else the dataset's, else ``market``.

    A store whose rule is ``market`` is scored single-shot (E3) when its dataset is one of
    the small single-shot sets or it holds several trials.
    """
    dataset = (dataset or "").lower()
    rule = _STORE_RULES.get((store_rule or "").lower())
    if rule is None:
        rule = {"sysu_mm01": "sysu", "sysu": "sysu", "regdb": "regdb"}.get(dataset, "market")
    if rule == "market" and (dataset in SINGLE_SHOT_DATASETS or num_trials > 1):
        rule = "single-shot"
    return PROTOCOLS[rule]


#: protocols defined only on one dataset's structure (docs/datasets.md E2, E4, E5): the
#: datasets (or store eval rules) they belong to, and what else a store must hold
_DATASET_SPECIFIC = {
    "sysu": (("sysu_mm01", "sysu"), "a SYSU-MM01 store (visible and infrared rows of "
             "cameras 0–5; E4 drops the query location's cameras)"),
    "regdb": (("regdb",), "a RegDB store (visible and thermal rows; E5)"),
    "cuhk03_sgs": (("cuhk03",), "a CUHK03 store (classic single-gallery-shot rule E2)"),
}


def check_protocol_fits(protocol: Protocol, dataset: str | None, store_rule: str | None,
                        modalities, cameras, auto_name: str | None = None) -> None:
    """EvaluationError when ``protocol`` needs a dataset's own structure the store lacks.

    ``dataset``/``store_rule``: the store's dataset name and eval rule; ``modalities`` and
    ``cameras`` (0-based camids) of its evaluated rows. A SYSU or RegDB protocol is also
    accepted on any store whose rows are cross-modality (SYSU: cameras 0–5 only), e.g. a
    merged or imported copy; single-gallery-shot only on CUHK03 stores (or their rule)."""
    if protocol.name not in _DATASET_SPECIFIC:
        return
    datasets, needs = _DATASET_SPECIFIC[protocol.name]
    dataset = (dataset or "").lower()
    rule = _STORE_RULES.get((store_rule or "").lower())
    if dataset in datasets or rule == protocol.name:
        return
    mods = sorted({str(m) for m in modalities})
    cams = np.asarray(cameras, dtype=np.int64)
    if protocol.name == "regdb" and len(mods) >= 2:
        return
    if protocol.name == "sysu" and len(mods) >= 2 and (cams.size == 0 or
                                                       int(cams.max()) <= 5):
        return
    hint = f"use {param('protocol', auto_name)} (what {param('protocol', 'auto')} picks)" if auto_name \
        else f"use {param('protocol', 'auto')}"
    raise EvaluationError(f"{param('protocol', protocol.name)} needs {needs}; this store holds "
                          f"dataset {dataset or 'unknown'!r} with modalities "
                          f"{', '.join(mods) or 'none'}",
                          hint)


# -- labels ----------------------------------------------------------------------------------
def identity_codes(records: RecordTable) -> np.ndarray:
    """Integer identity per record row from its ``(dataset, domain, pid_scope, pid)`` key.

    Bare pids are not global (they restart per synthetic domain and MSMT17 split), so query
    and gallery ids are compared through these codes: 0, 1, … in order of each key's first
    row. ``records``: the record table (a DataFrame) or its columns as arrays (a store's
    ``record_columns``, no pandas). int64 [N].
    """
    pids = record_column(records, "pid", np.int64)
    n = len(pids)
    scope = [("all" if _missing(v) else str(v)) for v in record_column(records, "x_pid_scope")] \
        if "x_pid_scope" in records else None
    # one int64 per row: the code of (dataset, domain, scope), kept below N, then the pid's
    group = np.zeros(n, dtype=np.int64)
    for column in (record_column(records, "dataset"), record_column(records, "domain"), scope):
        if column is not None:
            codes, count = _string_codes(column)
            group = np.unique(group * count + codes, return_inverse=True)[1].reshape(-1)
    pid_values, pid_codes = np.unique(pids, return_inverse=True)
    keys = group * max(len(pid_values), 1) + pid_codes.reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.empty(len(first), dtype=np.int64)          # key → rank of its first row
    order[np.argsort(first, kind="stable")] = np.arange(len(first))
    return order[inverse.reshape(-1)]


def _string_codes(values) -> tuple[np.ndarray, int]:
    """(int64 codes [N] of ``values`` compared as strings — equal strings, equal codes —, number
    of distinct values). One column value, the usual case, is one vectorised comparison."""
    text = np.asarray(values).astype(str).reshape(-1)      # fixed-width: compared in C
    if len(text) == 0 or bool((text == text[0]).all()):
        return np.zeros(len(text), dtype=np.int64), 1
    uniq, codes = np.unique(text, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), len(uniq)


def record_column(records, name: str, dtype=None) -> np.ndarray:
    """Column ``name`` of a record table (DataFrame or mapping of arrays) as an array [N]."""
    return np.asarray(records[name], dtype=dtype)


def _missing(value) -> bool:
    """None or NaN (pandas' missing values of an object column; ``fillna`` replaces them)."""
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    return type(value).__name__ == "NAType"


@dataclasses.dataclass
class TrialLabels:
    """Labels of one trial's queries [Q] and gallery [G] (identity codes, pids, camids).

    ``query_camera`` [Q] / ``gallery_camera`` [G] are camera codes into ``cameras`` (a camera
    is (domain, camid)); left out, the rows are taken as one domain (codes of the camids).
    """

    query_ids: np.ndarray
    query_pids: np.ndarray
    query_cams: np.ndarray
    gallery_ids: np.ndarray
    gallery_pids: np.ndarray
    gallery_cams: np.ndarray
    query_camera: np.ndarray | None = None
    gallery_camera: np.ndarray | None = None
    cameras: CameraTable | None = None

    def __post_init__(self) -> None:
        if self.query_camera is None or self.gallery_camera is None or self.cameras is None:
            nq = len(self.query_cams)
            codes, self.cameras = camera_codes(None, np.concatenate(
                [np.asarray(self.query_cams, np.int64), np.asarray(self.gallery_cams, np.int64)]))
            self.query_camera, self.gallery_camera = codes[:nq], codes[nq:]

    @classmethod
    def from_arrays(cls, query_pids, query_cams, gallery_pids, gallery_cams,
                    query_ids=None, gallery_ids=None) -> "TrialLabels":
        """Labels from arrays; identity codes default to the pids themselves."""
        qp = np.asarray(query_pids, dtype=np.int64)
        gp = np.asarray(gallery_pids, dtype=np.int64)
        return cls(query_ids=qp.copy() if query_ids is None else np.asarray(query_ids, np.int64),
                   query_pids=qp, query_cams=np.asarray(query_cams, dtype=np.int64),
                   gallery_ids=gp.copy() if gallery_ids is None
                   else np.asarray(gallery_ids, np.int64),
                   gallery_pids=gp, gallery_cams=np.asarray(gallery_cams, dtype=np.int64))

    @classmethod
    def from_records(cls, records: RecordTable, codes: np.ndarray, query_rows: np.ndarray,
                     gallery_rows: np.ndarray,
                     cameras: tuple[np.ndarray, CameraTable] | None = None) -> "TrialLabels":
        """Labels of store rows; ``codes`` [N] identity codes of every record. ``cameras``:
        (camera code of every record [N], table) — e.g. :func:`evaluated_cameras`, so codes
        agree across trials; default: the cameras of these rows. ``records``: a DataFrame or
        a mapping of arrays (:func:`record_column`)."""
        pids = record_column(records, "pid", np.int64)
        cams = record_column(records, "camid", np.int64)
        nq = len(query_rows)
        if cameras is None:
            cam_codes, table = record_cameras(records,
                                                 np.concatenate([query_rows, gallery_rows]))
            q_cam, g_cam = cam_codes[:nq], cam_codes[nq:]
        else:
            q_cam, g_cam, table = cameras[0][query_rows], cameras[0][gallery_rows], cameras[1]
        return cls(query_ids=codes[query_rows], query_pids=pids[query_rows],
                   query_cams=cams[query_rows], gallery_ids=codes[gallery_rows],
                   gallery_pids=pids[gallery_rows], gallery_cams=cams[gallery_rows],
                   query_camera=q_cam, gallery_camera=g_cam, cameras=table)

    @property
    def num_queries(self) -> int:
        return len(self.query_ids)

    @property
    def num_gallery(self) -> int:
        return len(self.gallery_ids)

    def validate(self) -> None:
        for name in ("query_pids", "query_cams", "query_ids", "query_camera"):
            if len(getattr(self, name)) != self.num_queries:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, "
                                 f"expected {self.num_queries}")
        for name in ("gallery_pids", "gallery_cams", "gallery_ids", "gallery_camera"):
            if len(getattr(self, name)) != self.num_gallery:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, "
                                 f"expected {self.num_gallery}")


def evaluated_cameras(records: RecordTable, rows: np.ndarray) -> tuple[np.ndarray,
                                                                       CameraTable]:
    """Camera code of every record [N] (−1 outside ``rows``) and the table of the cameras of
    ``rows`` (the query and gallery rows of every evaluated trial)."""
    rows = distinct(np.asarray(rows, dtype=np.int64))
    codes, table = record_cameras(records, rows)
    out = np.full(len(record_column(records, "pid")), -1, dtype=np.int64)
    out[rows] = codes
    return out, table


@dataclasses.dataclass
class Group:
    """Queries (positions in the trial's query list) and the gallery columns they all see."""

    query_pos: np.ndarray
    gallery_pos: np.ndarray


#: reasons a query is skipped, as counted in the report
SKIP_NO_MATCH = "no_match"
SKIP_JUNK_QUERY = "junk_or_distractor_query"


def scorable_queries(labels: TrialLabels) -> np.ndarray:
    """Queries that can have a match: not junk (-1) and not a distractor (0). bool [Q]."""
    return labels.query_pids > DISTRACTOR_PID


def make_groups(protocol: Protocol, labels: TrialLabels) -> list[Group]:
    """Split the trial's scorable queries into groups sharing one gallery column set."""
    queries = np.flatnonzero(scorable_queries(labels))
    kept = np.flatnonzero(labels.gallery_pids != JUNK_PID)
    if not protocol.sysu_locations:
        return [Group(queries, kept)] if len(queries) else []
    q_loc = sysu_location(labels.query_cams[queries])
    g_loc = sysu_location(labels.gallery_cams[kept])
    return [Group(queries[q_loc == loc], kept[g_loc != loc]) for loc in distinct(q_loc)]


def sysu_location(camids: np.ndarray) -> np.ndarray:
    """Location of 0-based SYSU camera ids (``camid + 1`` looked up in E4's table)."""
    cams = np.asarray(camids, dtype=np.int64) + 1
    lookup = np.arange(max(int(cams.max(initial=0)), 6) + 1)
    for cam, loc in SYSU_LOCATION.items():
        lookup[cam] = loc
    return lookup[cams]


# -- camera selection (DART3 setting A, --query-cams) -------------------------------------------
def unseen_query_cameras(query_cams: Iterable[int], query_cameras: list[int] | None,
                         train_cameras: list[int] | None) -> list[int]:
    """Camids whose queries are scored under ``camera-split`` (with several domains, a camid
    selects that camera of every domain)."""
    present = sorted({int(c) for c in query_cams})
    if query_cameras is not None:
        chosen = query_cameras
    elif train_cameras is not None:
        chosen = [c for c in present if c not in set(train_cameras)]
    else:
        raise EvaluationError("protocol 'camera-split' needs the unseen cameras",
                              f"pass {param('query_cams')} or {param('train_cams')} "
                              "(lists of 0-based camids)")
    missing = [c for c in chosen if c not in present]
    if missing or not chosen:
        given = param("query_cams") if query_cameras is not None else param("train_cams")
        raise EvaluationError(f"{given}: no query of the store is from camera(s) "
                              f"{', '.join(map(str, missing or chosen)) or '(none left)'}",
                              f"query cameras are {', '.join(map(str, present))}")
    return list(chosen)
