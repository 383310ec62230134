"""The unified record table (docs/datasets.md).

One record per image. Whole datasets travel as a pandas DataFrame with the columns
``path, pid, camid, split, modality, dataset, domain, frame`` followed by the flattened
``extra`` mapping as ``x_<key>`` columns. A bare ``pid`` is never a global key: identities are
``(dataset, domain, pid_scope, pid)`` because pids restart per synthetic domain and per MSMT17
split.
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from reidcli.errors import InputFileError

#: Columns of the record table, in normative order (``extra`` is flattened to ``x_*``).
RECORD_COLUMNS: tuple[str, ...] = (
    "path", "pid", "camid", "split", "modality", "dataset", "domain", "frame")
SPLITS: tuple[str, ...] = ("train", "val", "query", "gallery")
MODALITIES: tuple[str, ...] = ("visible", "infrared")
PID_SCOPES: tuple[str, ...] = ("all", "train", "test")
#: Stored value of ``frame`` when a dataset encodes none (pandas shows it as <NA>).
NO_FRAME = -1


@dataclasses.dataclass(frozen=True)
class ReidRecord:
    """One image of a dataset. Field order is normative (docs/datasets.md)."""

    path: str
    pid: int
    camid: int
    split: str
    modality: str = "visible"
    dataset: str = ""
    domain: str = ""
    frame: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if self.modality not in MODALITIES:
            raise ValueError(f"modality must be one of {MODALITIES}, got {self.modality!r}")
        if not self.domain:
            object.__setattr__(self, "domain", self.dataset)
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))


def records_to_frame(records: Iterable[ReidRecord]) -> pd.DataFrame:
    """Turn records into the record table (one row per record, ``extra`` as ``x_<key>``)."""
    rows = []
    for rec in records:
        row = {c: getattr(rec, c) for c in RECORD_COLUMNS}
        row.update({f"x_{k}": v for k, v in rec.extra.items()})
        rows.append(row)
    if not rows:
        return empty_frame()
    frame = pd.DataFrame(rows)
    return normalize_frame(frame)


def empty_frame() -> pd.DataFrame:
    """An empty record table with the normative columns and dtypes."""
    return normalize_frame(pd.DataFrame({c: [] for c in RECORD_COLUMNS}))


def normalize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Coerce column dtypes: ints as int64, ``frame`` as nullable Int64, strings as object.

    Missing ``modality`` defaults to ``visible``, missing ``domain`` to ``dataset``.
    """
    frame = frame.copy()
    if "modality" not in frame:
        frame["modality"] = "visible"
    if "dataset" not in frame:
        frame["dataset"] = ""
    if "domain" not in frame:
        frame["domain"] = frame["dataset"]
    if "frame" not in frame:
        frame["frame"] = pd.NA
    frame["pid"] = frame["pid"].astype(np.int64)
    frame["camid"] = frame["camid"].astype(np.int64)
    fr = pd.to_numeric(frame["frame"], errors="coerce").astype("Int64")
    frame["frame"] = fr.mask(fr == NO_FRAME)
    for col in ("path", "split", "modality", "dataset", "domain"):
        frame[col] = frame[col].astype(object).map(str)
    extra = sorted(c for c in frame.columns if c.startswith("x_"))
    unknown = [c for c in frame.columns if c not in RECORD_COLUMNS and not c.startswith("x_")]
    if unknown:
        raise ValueError(f"unknown record columns {unknown}; extras must start with 'x_'")
    return frame[list(RECORD_COLUMNS) + extra].reset_index(drop=True)


def validate_frame(frame: pd.DataFrame, source: str = "records") -> pd.DataFrame:
    """Check a record table and return it normalised.

    Raises :class:`InputFileError` naming ``source`` when a column is missing, a value is of
    the wrong type, or ``split``/``modality`` hold a value outside the allowed sets.
    """
    missing = [c for c in ("path", "pid", "camid", "split") if c not in frame.columns]
    if missing:
        raise InputFileError(f"{source} lacks the record column(s) {', '.join(missing)}",
                             "give path, pid, camid and split for every row")
    for col in ("pid", "camid"):
        values = pd.to_numeric(frame[col], errors="coerce")
        if values.isna().any() or (values != np.round(values)).any():
            bad = frame[col][values.isna() | (values != np.round(values))].iloc[0]
            raise InputFileError(f"{source}: column {col} holds a non-integer value {bad!r}",
                                 f"{col} must be an integer for every row")
    try:
        out = normalize_frame(frame)
    except ValueError as exc:
        raise InputFileError(f"{source}: {exc}", "fix the record columns") from None
    for col, allowed in (("split", SPLITS), ("modality", MODALITIES)):
        bad = sorted(set(out[col]) - set(allowed))
        if bad:
            raise InputFileError(f"{source}: column {col} holds {bad}",
                                 f"allowed values are {', '.join(allowed)}")
    if (out["camid"] < 0).any():
        raise InputFileError(f"{source}: negative camid", "camid is 0-based (c1 → 0)")
    if (out["pid"] < -1).any():
        raise InputFileError(f"{source}: pid below -1",
                             "pids are native ids; 0 = distractor, -1 = junk")
    if "x_pid_scope" in out:
        bad = sorted(set(out["x_pid_scope"].dropna()) - set(PID_SCOPES))
        if bad:
            raise InputFileError(f"{source}: column x_pid_scope holds {bad}",
                                 f"allowed values are {', '.join(PID_SCOPES)}")
    return out


def identity_keys(frame: pd.DataFrame) -> pd.Series:
    """Global identity key per row: ``(dataset, domain, pid_scope, pid)`` tuples."""
    scope = frame["x_pid_scope"].fillna("all") if "x_pid_scope" in frame else "all"
    keys = pd.DataFrame({"dataset": frame["dataset"], "domain": frame["domain"],
                         "pid_scope": scope, "pid": frame["pid"].astype(np.int64)})
    return pd.Series(list(keys.itertuples(index=False, name=None)), index=frame.index)


def encode_identities(frame: pd.DataFrame) -> tuple[np.ndarray, list[tuple]]:
    """Training labels 0..C-1 over the *sorted* unique identity keys (docs/datasets.md).

    Returns ``(labels [N] int64, classes)`` where ``classes[label]`` is the identity key.
    """
    keys = identity_keys(frame)
    classes = sorted(set(keys))
    lookup = {k: i for i, k in enumerate(classes)}
    labels = np.fromiter((lookup[k] for k in keys), dtype=np.int64, count=len(keys))
    return labels, classes


def frame_to_records(frame: pd.DataFrame) -> list[ReidRecord]:
    """Inverse of :func:`records_to_frame` (``<NA>`` frame → None, NaN extras dropped)."""
    extra_cols = [c for c in frame.columns if c.startswith("x_")]
    out = []
    for row in frame.itertuples(index=False):
        d = row._asdict()
        extra = {c[2:]: d[c] for c in extra_cols if not _is_missing(d[c])}
        fr = d["frame"]
        out.append(ReidRecord(path=d["path"], pid=int(d["pid"]), camid=int(d["camid"]),
                              split=d["split"], modality=d["modality"], dataset=d["dataset"],
                              domain=d["domain"], frame=None if _is_missing(fr) else int(fr),
                              extra=extra))
    return out


def _is_missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass
class DatasetSplit:
    """One loaded dataset trial (docs/datasets.md).

    ``train``/``val``/``query``/``gallery`` are record tables; ``eval_rule`` is one of
    ``market``, ``cuhk03_sgs``, ``sysu``, ``regdb``, ``single_shot_any`` (docs/datasets.md).
    """

    name: str
    train: pd.DataFrame
    query: pd.DataFrame
    gallery: pd.DataFrame
    val: pd.DataFrame = dataclasses.field(default_factory=empty_frame)
    eval_rule: str = "market"
    eval_kwargs: dict = dataclasses.field(default_factory=dict)
    trial: int = 0
    num_trials: int = 1
    protocol: str = "standard"
    options: dict = dataclasses.field(default_factory=dict)

    def all_records(self) -> pd.DataFrame:
        """All splits concatenated (train, val, query, gallery) with their ``split`` column."""
        parts = [f for f in (self.train, self.val, self.query, self.gallery) if len(f)]
        if not parts:
            return empty_frame()
        return normalize_frame(pd.concat(parts, ignore_index=True))
