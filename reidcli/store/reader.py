"""Reading feature stores: validated on open, lazy per-row / per-block access."""
from __future__ import annotations

import dataclasses
import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np
import pandas as pd

from reidcli.errors import StoreError
from reidcli.naming import param
from reidcli.store.records_io import read_records
from reidcli.store.schema import (ADAPT, CONVMAPS, FEATURES, PROTOCOL, RECORDS, SCHEMA_VERSION,
                                  STORE_FORMAT, trial_index)


@dataclasses.dataclass
class StoreProtocol:
    """The ``/protocol`` group: name, evaluation rule, options and per-trial index arrays."""

    name: str
    eval_rule: str
    attrs: dict
    trials: list[dict[str, np.ndarray]]

    @property
    def num_trials(self) -> int:
        return len(self.trials)


class FeatureStore:
    """An open feature store (use :func:`open_store`).

    ``records`` is the record table (N rows); features are read lazily by row index.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist",
                             "check the path, or create it with reid extract / reid store import")
        try:
            self.h5 = h5py.File(self.path, "r")
        except OSError:
            raise StoreError(f"{self.path} is not an HDF5 file",
                             "give a store written by reid extract / reid store import") from None
        try:
            self._validate()
        except BaseException:
            self.h5.close()
            raise

    def _validate(self) -> None:
        fmt = self.h5.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != STORE_FORMAT:
            raise StoreError(f"{self.path} is not a reidcli feature store (format={fmt!r})",
                             f"expected format={STORE_FORMAT!r}; create it with reid extract "
                             "or reid store import")
        schema = self.h5.attrs.get("schema")
        try:
            schema = None if schema is None else int(schema)
        except (TypeError, ValueError):
            schema = str(schema)
        if schema is None or schema != SCHEMA_VERSION:
            hint = ("upgrade reidcli" if isinstance(schema, int) and schema > SCHEMA_VERSION
                    else "re-create the store with this reidcli")
            raise StoreError(f"store {self.path} has schema {schema}, this reidcli reads "
                             f"schema {SCHEMA_VERSION}", hint)
        if "complete" in self.h5.attrs and not bool(self.h5.attrs["complete"]):
            raise StoreError(f"store {self.path} was not completely written (interrupted)",
                             "re-run the command that writes it")
        if RECORDS not in self.h5:
            raise StoreError(f"store {self.path} has no /records group",
                             "the file is damaged; re-create it")
        n = self.num_rows
        for col in self.h5[RECORDS]:
            if self.h5[RECORDS][col].shape != (n,):
                raise StoreError(f"store {self.path}: /records/{col} has "
                                 f"{self.h5[RECORDS][col].shape[0]} rows, expected {n}",
                                 "the file is damaged; re-create it")
        for group in (FEATURES, CONVMAPS):
            for name in self.h5.get(group, {}):
                if self.h5[group][name].shape[0] != n:
                    raise StoreError(f"store {self.path}: /{group}/{name} has "
                                     f"{self.h5[group][name].shape[0]} rows, expected {n}",
                                     "the file is damaged; re-create it")

    # -- metadata -------------------------------------------------------------------------
    @property
    def attrs(self) -> dict[str, Any]:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in self.h5.attrs.items()}

    @property
    def num_rows(self) -> int:
        if "num_rows" in self.h5.attrs:
            return int(self.h5.attrs["num_rows"])
        return int(self.h5[RECORDS]["pid"].shape[0])

    @property
    def dataset(self) -> str | None:
        """Registry name of the dataset, or None when unknown (e.g. imported features)."""
        value = self.attrs.get("dataset", "")
        return value or None

    @property
    def provenance(self) -> dict[str, Any]:
        raw = self.attrs.get("provenance", "{}")
        try:
            return json.loads(raw)
        except (TypeError, json.JSONDecodeError):
            return {}

    @cached_property
    def records(self) -> pd.DataFrame:
        """The record table, N rows (read once, cached)."""
        try:
            return read_records(self.h5[RECORDS])
        except KeyError as exc:
            raise StoreError(f"store {self.path} lacks the record column(s) {exc.args[0]}",
                             "the file is damaged; re-create it") from None

    def split_rows(self, split: str) -> np.ndarray:
        """Row indices (int64, ascending) whose ``split`` equals ``split``."""
        return np.flatnonzero(self.records["split"].to_numpy() == split).astype(np.int64)

    # -- features -------------------------------------------------------------------------
    @property
    def feature_names(self) -> list[str]:
        return sorted(self.h5.get(FEATURES, {}))

    def default_feature(self) -> str:
        """The root attr ``default_feature`` when it names a stored feature (reid extract
        --model sets it), else the only feature or the first by name; StoreError if none."""
        names = self.feature_names
        if not names:
            raise StoreError(f"store {self.path} has no features",
                             "re-run reid extract, or import features (reid store import)")
        chosen = self.h5.attrs.get("default_feature", "")
        chosen = chosen.decode() if isinstance(chosen, bytes) else str(chosen)
        return chosen if chosen in names else names[0]

    def require_feature(self, name: str | None) -> str:
        """``name`` if present (default feature if None), else a StoreError naming the choices."""
        if name is None:
            return self.default_feature()
        if name not in self.feature_names:
            have = ", ".join(self.feature_names) or "none"
            raise StoreError(f"store {self.path} has no feature {name!r} (has: {have})",
                             f"pick one with {param('feature')}")
        return name

    def feature_info(self, name: str) -> dict[str, Any]:
        """``{"dim", "metric", "normalized", "dtype"}`` of a feature."""
        ds = self.h5[FEATURES][self.require_feature(name)]
        metric = ds.attrs.get("metric", "euclidean")
        return {"dim": int(ds.shape[1]),
                "metric": metric.decode() if isinstance(metric, bytes) else str(metric),
                "normalized": bool(ds.attrs.get("normalized", False)),
                "dtype": str(ds.dtype)}

    def features(self, name: str | None = None, rows: np.ndarray | slice | None = None
                 ) -> np.ndarray:
        """Feature rows as float32 [len(rows), D]; ``rows`` None = all, any int index order."""
        ds = self.h5[FEATURES][self.require_feature(name)]
        return _read_rows(ds, rows).astype(np.float32, copy=False)

    def iter_feature_blocks(self, name: str | None, rows: np.ndarray | None = None,
                            block_size: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(row_indices [b], features [b, D])`` blocks over ``rows`` (default all)."""
        rows = np.arange(self.num_rows) if rows is None else np.asarray(rows, dtype=np.int64)
        for start in range(0, len(rows), block_size):
            idx = rows[start:start + block_size]
            yield idx, self.features(name, idx)

    # -- conv maps ------------------------------------------------------------------------
    @property
    def convmap_layers(self) -> list[str]:
        return sorted(self.h5.get(CONVMAPS, {}), key=_layer_order)

    def require_convmaps(self, layers: list[str] | None = None) -> list[str]:
        """Layers to use (all if None); StoreError when the store has none or lacks one."""
        have = self.convmap_layers
        if not have:
            raise StoreError(f"store {self.path} has no conv maps",
                             f"re-run the extraction with {param('maps')}")
        for layer in layers or []:
            if layer not in have:
                raise StoreError(f"store {self.path} has no conv maps of layer {layer!r} "
                                 f"(has: {', '.join(have)})",
                                 f"pick layers with {param('layers')}")
        return list(layers or have)

    def convmap_shape(self, layer: str) -> tuple[int, int, int]:
        """``(C, H, W)`` of a conv-map layer."""
        return tuple(self.h5[CONVMAPS][self.require_convmaps([layer])[0]].shape[1:])

    def convmaps(self, layer: str, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Conv maps [len(rows), C, H, W] in their stored dtype (float16 by default)."""
        self.require_convmaps([layer])
        return _read_rows(self.h5[CONVMAPS][layer], rows)

    # -- protocol / adapt -------------------------------------------------------------------
    @property
    def shard(self) -> tuple[int, int] | None:
        """``(i, n)`` when this store is shard i of n, else None."""
        attrs = self.h5.attrs
        if "shard_index" not in attrs:
            return None
        return int(attrs["shard_index"]), int(attrs["shard_count"])

    @cached_property
    def protocol(self) -> StoreProtocol | None:
        """The stored protocol trials, or None if the store has none."""
        if self.shard is not None:
            i, n = self.shard
            raise StoreError(f"store {self.path} is shard {i}/{n}; its protocol refers to the "
                             "whole dataset", "join the shards with reid store merge first")
        return self.read_protocol()

    def read_protocol(self) -> StoreProtocol | None:
        """The raw ``/protocol`` group (also of a shard), or None."""
        if PROTOCOL not in self.h5:
            return None
        group = self.h5[PROTOCOL]
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in group.attrs.items()}
        try:
            options = json.loads(attrs.get("options", "{}"))
        except json.JSONDecodeError:
            options = {}
        keys = sorted((k for k in group if trial_index(k) is not None), key=trial_index)
        trials = [{name: group[k][name][()] for name in group[k]} for k in keys]
        return StoreProtocol(name=str(attrs.get("name", "")),
                             eval_rule=str(attrs.get("eval_rule", "market")),
                             attrs={**attrs, "options": options}, trials=trials)

    def query_gallery_trials(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Every trial as ``(k, query_rows, gallery_rows)`` (int64 row indices): the
        protocol's trials, or one trial of the ``query``/``gallery`` split rows."""
        proto = self.protocol
        if proto is not None and proto.trials:
            return [(k, np.asarray(t["query_idx"], np.int64),
                     np.asarray(t["gallery_idx"], np.int64)) for k, t in enumerate(proto.trials)]
        return [(0, self.split_rows("query"), self.split_rows("gallery"))]

    @property
    def adapt_methods(self) -> list[str]:
        return sorted(self.h5.get(ADAPT, {}))

    def adapt_arrays(self, method: str) -> dict[str, np.ndarray]:
        if method not in self.adapt_methods:
            raise StoreError(f"store {self.path} has no /adapt/{method} group",
                             "run reid adapt first")
        group = self.h5[ADAPT][method]
        return {k: group[k][()] for k in group}

    def close(self) -> None:
        self.h5.close()

    def __enter__(self) -> "FeatureStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FeatureStore({str(self.path)!r}, rows={self.num_rows})"


def open_store(path: str | os.PathLike) -> FeatureStore:
    """Open and validate a feature store (context manager)."""
    return FeatureStore(path)


def _layer_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 10**6, name)


def _read_rows(ds: h5py.Dataset, rows: np.ndarray | slice | None) -> np.ndarray:
    """Read rows in any order; h5py needs increasing unique indices, so sort and undo."""
    if rows is None:
        return ds[()]
    if isinstance(rows, slice):
        return ds[rows]
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return np.empty((0,) + ds.shape[1:], dtype=ds.dtype)
    uniq, inverse = np.unique(rows, return_inverse=True)
    if uniq[0] < 0 or uniq[-1] >= ds.shape[0]:
        raise IndexError(f"row index out of range 0..{ds.shape[0] - 1}")
    if len(uniq) == uniq[-1] - uniq[0] + 1:      # contiguous: one slice read
        block = ds[int(uniq[0]):int(uniq[-1]) + 1]
        if len(uniq) == len(rows) and np.array_equal(uniq, rows):
            return block                           # already in order: no index copy
    elif len(uniq) > ds.shape[0] // 4:           # dense selection: read all, then take
        block = ds[()][uniq]
    else:
        block = ds[uniq]
    return block[inverse]
