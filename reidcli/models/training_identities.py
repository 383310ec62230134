"""Which identities a trained model saw, and whether a test protocol scores it on them.

A ``reid train`` model file records its training identities (``meta["classes"]``: the global
keys ``[dataset, domain, pid_scope, pid]`` of docs/datasets.md, label order), the dataset and
its loader options, ``trial`` included (default 0). On a dataset with several random
train/test trials (RegDB, VIPeR, PRID, GRID, CUHK01, iLIDS …) the test identities of the
other trials are partly training identities of the model's trial: scoring them measures
memorisation, not re-identification. :func:`trial_overlaps` counts them per trial;
:func:`overlap_record` is what a store's provenance keeps (key :data:`PROVENANCE_KEY`) so that
``reid eval`` can find overlapping query/gallery rows later (:func:`rows_overlap`), also
through ``reid adapt`` and ``reid store merge``, whose provenance nests the source's.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - annotations only (`reid eval` loads no pandas)
    import pandas as pd

#: key of the store provenance entry written by :func:`overlap_record`
PROVENANCE_KEY = "training_identities"
#: at most this many overlapping identity keys are listed in a store's provenance
MAX_LISTED = 400

Key = tuple  # (dataset, domain, pid_scope, pid)


def _key(value: Any) -> Key | None:
    if isinstance(value, (list, tuple)) and len(value) == 4:
        dataset, domain, scope, pid = value
        if all(isinstance(v, str) for v in (dataset, domain, scope)):
            try:
                return (dataset, domain, scope, int(pid))
            except (TypeError, ValueError):
                return None
    return None


def _keys(values: Iterable[Any]) -> frozenset[Key] | None:
    """Identity keys of ``values``; None when any value is not a 4-field key."""
    out = []
    for value in values:
        key = _key(value)
        if key is None:
            return None
        out.append(key)
    return frozenset(out)


def digest(keys: Iterable[Key]) -> str:
    """Hex sha256 of the sorted identity keys (JSON)."""
    text = json.dumps(sorted([list(k) for k in keys]), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class TrainingIdentities:
    """The training identities of a model file. ``dataset`` / ``trial``: the single dataset
    and protocol trial it was trained on (None for several sources)."""

    keys: frozenset
    dataset: str | None
    trial: int | None
    model: str = ""

    @property
    def digest(self) -> str:
        return digest(self.keys)


def training_identities(meta: Mapping[str, Any], model: str = "") -> TrainingIdentities | None:
    """What a model file's ``meta`` says about its training identities; None when it records
    none (a model not written by ``reid train``)."""
    classes = meta.get("classes")
    keys = _keys(classes) if isinstance(classes, (list, tuple)) and classes else None
    if keys is None:
        return None
    config = meta.get("config") if isinstance(meta.get("config"), Mapping) else {}
    dataset = meta.get("dataset")
    if not isinstance(dataset, str) or not dataset or config.get("sources"):
        return TrainingIdentities(keys, None, None, model)
    options = meta.get("options") if isinstance(meta.get("options"), Mapping) else {}
    try:
        from reidcli.data.registry import canonical_name
        dataset = canonical_name(dataset)
    except Exception:  # noqa: BLE001 - an unknown name stays as recorded
        pass
    try:
        trial = int(options.get("trial", 0))
    except (TypeError, ValueError):
        trial = None
    return TrainingIdentities(keys, dataset, trial, model)


def row_identities(records: pd.DataFrame, rows: np.ndarray | Sequence[int]) -> set[Key]:
    """Identity keys of the given rows of a record table."""
    from reidcli.data.records import identity_keys

    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return set()
    return {(str(d), str(m), str(s), int(p)) for d, m, s, p in
            identity_keys(records.iloc[rows])}


def test_rows(trial: Mapping[str, np.ndarray]) -> np.ndarray:
    """Query and gallery rows of a layout/store trial."""
    return np.concatenate([np.asarray(trial.get("query_idx", []), dtype=np.int64),
                           np.asarray(trial.get("gallery_idx", []), dtype=np.int64)])


def trial_numbers(layout) -> list[int]:
    """The dataset's trial number of each trial of a :class:`StoreLayout`."""
    numbers = layout.options.get("trials")
    return [int(t) for t in numbers] if numbers is not None and \
        len(numbers) == len(layout.trials) else list(range(len(layout.trials)))


def trial_overlaps(layout, training: TrainingIdentities) -> dict[int, set[Key]]:
    """Dataset trial number → its test (query + gallery) identities that are training
    identities of the model."""
    return {number: row_identities(layout.records, test_rows(trial)) & training.keys
            for number, trial in zip(trial_numbers(layout), layout.trials)}


def overlap_record(training: TrainingIdentities, overlaps: Mapping[int, set[Key]],
                   allowed: bool) -> dict[str, Any]:
    """The store provenance entry: the model's training identities (count, digest, dataset,
    trial), the overlap count per extracted trial, the overlapping keys (at most
    :data:`MAX_LISTED`; ``listed`` False when cut) and whether the overlap was allowed."""
    union = sorted(set().union(*overlaps.values())) if overlaps else []
    return {"model": training.model, "count": len(training.keys), "sha256": training.digest,
            "dataset": training.dataset, "trial": training.trial,
            "overlap_per_trial": {str(k): len(v) for k, v in overlaps.items()},
            "overlap_identities": [list(k) for k in union[:MAX_LISTED]],
            "listed": len(union) <= MAX_LISTED, "allowed": bool(allowed)}


def find_records(provenance: Any) -> list[dict[str, Any]]:
    """Every :data:`PROVENANCE_KEY` entry in a store's provenance, nested ones included
    (``source_provenance`` of ``reid adapt``, ``merged_from`` of ``reid store merge``)."""
    found: list[dict[str, Any]] = []
    stack = [provenance]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            entry = item.get(PROVENANCE_KEY)
            if isinstance(entry, Mapping):
                found.append(dict(entry))
            stack.extend(v for k, v in item.items() if k != PROVENANCE_KEY)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def rows_overlap(provenance: Any, records: pd.DataFrame,
                 rows: np.ndarray | Sequence[int]) -> tuple[int, bool] | None:
    """(number of identities of ``rows`` that the store's model trained on, whether that
    count is exact) from the store's provenance; None when it records no training
    identities. Not exact when the provenance could not list every overlapping key (then
    the count is a lower bound, and a store with any recorded overlap counts ≥ 1)."""
    entries = find_records(provenance)
    if not entries:
        return None
    listed: set[Key] = set()
    exact, any_recorded = True, False
    for entry in entries:
        keys = _keys(entry.get("overlap_identities") or []) or frozenset()
        listed |= keys
        exact = exact and bool(entry.get("listed", True))
        counts = entry.get("overlap_per_trial") or {}
        any_recorded = any_recorded or any(int(v) > 0 for v in counts.values())
    count = len(row_identities(records, rows) & listed) if listed else 0
    if not exact and any_recorded and count == 0:
        return 1, False
    return count, exact


__all__ = ["TrainingIdentities", "training_identities", "trial_overlaps", "overlap_record",
           "find_records", "rows_overlap", "row_identities", "test_rows", "trial_numbers",
           "digest", "PROVENANCE_KEY", "MAX_LISTED"]
