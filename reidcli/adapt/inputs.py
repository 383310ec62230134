"""What ``reid adapt`` reads from a store (docs/formats.md, "Feature store").

The query and gallery of one protocol trial (``--trial``, default 0; the ``query`` /
``gallery`` split rows of a store without a protocol), one feature, and the camera of every
row. A camera is the pair (domain, camid), numbered ``0..n-1`` in sorted order over the
query, gallery (and grounding) rows (:func:`reidcli.cameras.camera_codes`) — the row index of
every per-camera array. ``query_cams`` are camid values, applied within every domain.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reidcli.cameras import CameraTable, record_cameras
from reidcli.errors import ParameterError, StoreError, UsageError
from reidcli.naming import param


@dataclasses.dataclass
class AdaptInputs:
    """One trial's query/gallery features and cameras, ready for adaptation.

    ``queries`` [Nq, d] are all queries of the trial (statistics use them all);
    ``selected`` [Ns] are the positions (into ``queries``) of the queries to adapt, in store
    order; ``grounding`` [Np, d] the optional grounding pool (docs/methods/dart3.md).
    """

    store: Path
    feature: str
    feature_attrs: dict[str, Any]
    trial: int
    num_trials: int
    records: pd.DataFrame
    query_rows: np.ndarray          # [Nq] store rows
    gallery_rows: np.ndarray        # [Ng] store rows
    queries: np.ndarray             # [Nq, d] float32
    gallery: np.ndarray             # [Ng, d] float32
    query_codes: np.ndarray         # [Nq] camera codes
    gallery_codes: np.ndarray       # [Ng]
    selected: np.ndarray            # [Ns] positions into the queries
    cameras: CameraTable
    grounding_rows: np.ndarray      # [Np] store rows (empty when off)
    grounding: np.ndarray           # [Np, d]
    grounding_codes: np.ndarray     # [Np]
    store_attrs: dict[str, Any]
    store_provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.queries.shape[1])

    def image_paths(self, rows: np.ndarray, images_root: str | os.PathLike | None) -> list[str]:
        """Image file of each store row: the record path, made absolute with ``--images-root``
        when relative (and taken from under it when the recorded absolute path is gone)."""
        return [resolve_image_path(p, images_root)
                for p in self.records["path"].astype(str).to_numpy()[rows]]


def resolve_image_path(path: str, images_root: str | os.PathLike | None) -> str:
    """Absolute record paths are kept when they exist; otherwise ``--images-root/path``
    (relative) or ``--images-root/<last parts>`` is tried. A missing file is a one-line error."""
    p = Path(path)
    candidates = [p] if p.is_absolute() else []
    if images_root is not None:
        root = Path(images_root)
        if not p.is_absolute():
            candidates.append(root / p)
        else:
            candidates += [root / Path(*p.parts[-k:]) for k in range(1, min(4, len(p.parts)))]
    elif not p.is_absolute():
        candidates.append(p)
    for c in candidates:
        if c.is_file():
            return str(c)
    raise UsageError(f"image {path} of the store does not exist"
                     + (f" (also not under {param('images_root', images_root)})"
                        if images_root else ""),
                     f"pass {param('images_root', 'DIR')}, the folder the store's image paths "
                     "are relative to")


def read_inputs(store_path: str | os.PathLike, *, feature: str | None = None, trial: int = 0,
                query_cams: list[int] | None = None, grounding: int = 0,
                grounding_split: str = "auto") -> AdaptInputs:
    """Read trial ``trial`` of a store for adaptation (user errors are one-line StoreErrors)."""
    from reidcli.store import open_store

    with open_store(store_path) as st:
        name = st.require_feature(feature)
        attrs = st.feature_attrs(name)
        trials = st.query_gallery_trials()
        if not 0 <= trial < len(trials):
            raise ParameterError("adaptation", "trial", trial,
                                 f"is not a trial of store {st.path}, which has "
                                 f"{len(trials)} trial(s)",
                                 f"use {param('trial', f'0..{len(trials) - 1}')}")
        _, q_rows, g_rows = trials[trial]
        if len(q_rows) == 0 or len(g_rows) == 0:
            side = "query" if len(q_rows) == 0 else "gallery"
            raise StoreError(f"store {st.path} has no {side} rows in trial {trial}",
                             "write query and gallery rows (split or protocol) into the store")
        shared = np.intersect1d(q_rows, g_rows)
        if len(shared):
            raise StoreError(f"store {st.path}, trial {trial}: {len(shared)} row(s) are both "
                             "query and gallery", "adaptation writes one feature per row; "
                             "use a protocol with disjoint query and gallery rows")
        records = st.records
        queries = st.features(name, q_rows)
        gallery = st.features(name, g_rows)
        for what, arr in (("query", queries), ("gallery", gallery)):
            if not np.isfinite(arr).all():
                raise StoreError(f"store {st.path}: feature {name!r} has NaN/Inf {what} rows",
                                 "re-extract the features")
        g_pool = np.array([], np.int64)
        if grounding > 0:
            g_pool = _grounding_rows(st, records, grounding_split, q_rows, g_rows)
        pool_feats = st.features(name, g_pool) if len(g_pool) else \
            np.empty((0, queries.shape[1]), np.float32)
        store_attrs = st.attrs
        store_provenance = st.provenance
        num_trials = len(trials)
    codes, cams = record_cameras(records, np.concatenate([q_rows, g_rows, g_pool]))
    q_codes, g_codes = codes[:len(q_rows)], codes[len(q_rows):len(q_rows) + len(g_rows)]
    p_codes = codes[len(q_rows) + len(g_rows):]
    q_camids = records["camid"].to_numpy(np.int64)[q_rows]
    if query_cams is None:
        selected = np.arange(len(q_rows))
    else:
        selected = np.flatnonzero(np.isin(q_camids, np.asarray(query_cams, np.int64)))
        if len(selected) == 0:
            raise ParameterError("adaptation", "query_cams", ",".join(map(str, query_cams)),
                                 "selects no query: no query of the store is from these cameras",
                                 "query cameras are "
                                 + ", ".join(map(str, np.unique(q_camids))))
    return AdaptInputs(store=Path(store_path), feature=name, feature_attrs=attrs, trial=trial,
                       num_trials=num_trials, records=records, query_rows=q_rows,
                       gallery_rows=g_rows, queries=queries, gallery=gallery,
                       query_codes=q_codes, gallery_codes=g_codes, selected=selected,
                       cameras=cams, grounding_rows=g_pool, grounding=pool_feats,
                       grounding_codes=p_codes, store_attrs=store_attrs,
                       store_provenance=store_provenance)


def _grounding_rows(st, records: pd.DataFrame, split: str, q_rows, g_rows) -> np.ndarray:
    """Rows of the grounding pool: split ``grounding`` if the store has one, else ``train``
    (``auto``), or the named split; never a query or gallery row."""
    splits = records["split"].astype(str).to_numpy()
    if split == "auto":
        split = "grounding" if (splits == "grounding").any() else "train"
    rows = np.flatnonzero(splits == split)
    rows = np.setdiff1d(rows, np.concatenate([q_rows, g_rows]))
    pids = records["pid"].to_numpy(np.int64)[rows]
    rows = rows[pids > 0]                      # distractors/junk are not source samples
    if len(rows) == 0:
        raise UsageError(f"{param('grounding')}: store {st.path} has no {split!r} rows to "
                         "draw grounding samples from",
                         "extract the seen-camera / source training images into the store "
                         f"(split train or grounding), or use {param('grounding', 0)}")
    return rows


__all__ = ["AdaptInputs", "CameraTable", "read_inputs", "resolve_image_path"]
