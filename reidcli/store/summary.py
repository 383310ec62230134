"""Table of contents of a store (used by ``reid store info``)."""
from __future__ import annotations

from typing import Any

from reidcli.cameras import record_cameras
from reidcli.data.records import SPLITS
from reidcli.store.reader import FeatureStore

#: pids that are no identity (docs/formats.md, ``pid``): 0 distractor, -1 junk
DISTRACTOR_PID, JUNK_PID = 0, -1


def store_summary(store: FeatureStore) -> dict[str, Any]:
    """JSON-able summary: rows per split (images/ids/cams), features, conv maps, protocol,
    adaptation groups and provenance. ``ids`` counts identities (pid ≥ 1); rows of pid 0
    (distractors) and pid -1 (junk) are counted apart as ``distractors`` and ``junk``
    (docs/formats.md, ``pid``)."""
    rec = store.records
    splits = {}
    for split in SPLITS + tuple(sorted(set(rec["split"]) - set(SPLITS))):
        part = rec[rec["split"] == split]
        if len(part) == 0:
            continue
        scope = part["x_pid_scope"].fillna("all") if "x_pid_scope" in part else "all"
        people = part.assign(_scope=scope)[part["pid"].to_numpy() > DISTRACTOR_PID]
        ids = people[["dataset", "domain", "_scope", "pid"]].drop_duplicates()
        splits[split] = {
            "images": int(len(part)),
            "ids": int(len(ids)),
            "distractors": int((part["pid"] == DISTRACTOR_PID).sum()),
            "junk": int((part["pid"] == JUNK_PID).sum()),
            "cams": record_cameras(part)[1].num_cameras,     # a camera is (domain, camid)
            "modalities": sorted(set(part["modality"])),
            "domains": sorted(set(part["domain"])),
        }
    proto = None if store.shard is not None else store.protocol
    return {
        "path": str(store.path),
        "dataset": store.dataset,
        "rows": store.num_rows,
        "attrs": {k: v for k, v in store.attrs.items()
                  if k in ("format", "schema", "created", "reidcli_version")},
        "shard": list(store.shard) if store.shard else None,
        "splits": splits,
        "features": {n: {"shape": [store.num_rows, store.feature_info(n)["dim"]],
                         **store.feature_info(n)} for n in store.feature_names},
        "convmaps": {l: {"shape": [store.num_rows, *store.convmap_shape(l)],
                         "dtype": str(store.h5["convmaps"][l].dtype)}
                     for l in store.convmap_layers},
        "protocol": None if proto is None else {
            "name": proto.name, "eval_rule": proto.eval_rule, "trials": proto.num_trials},
        "adapt": store.adapt_methods,
        "provenance": store.provenance,
    }
