"""Streaming, atomic writer of feature stores.

The record table is written first; features and conv maps are then appended block by block
(a 1M-image extraction never holds all features in RAM). Everything goes to
``<out>.partial`` (:class:`reidcli.io.AtomicOutput`: locked, flushed, fsync-ed, re-opened
and checked before the rename); only a complete store is renamed onto the output path, so a
crash, a full disk or Ctrl-C never leaves a file that looks valid.

Example::

    with StoreWriter("x.h5", records, dataset="synthetic", provenance=prov) as w:
        w.add_feature("emb", dim=512, metric="cosine", normalized=True)
        for block in blocks:
            w.append_feature("emb", block)
"""
from __future__ import annotations

import contextlib
import json
import os
from io import StringIO
from pathlib import Path
from typing import Any, Mapping, Sequence

import h5py
import numpy as np
import pandas as pd

from reidcli.errors import ParameterError, StoreError, UsageError
from reidcli.io import (AtomicOutput, note_hdf5_close_failed, output_error, output_errors,
                        verify_hdf5)
from reidcli.naming import param
from reidcli.provenance import make_provenance, write_header
from reidcli.store.records_io import records_digest, write_records
from reidcli.store.schema import (ADAPT, CONVMAPS, FEATURES, METRICS,
                                  PROTOCOL, RECORDS, SCHEMA_VERSION, STORE_FORMAT, TRIAL_ARRAYS,
                                  trial_name)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` (0-based ``i``) → ``(i, n)``; ParameterError naming ``shard`` when malformed."""
    try:
        i_str, n_str = text.split("/")
        i, n = int(i_str), int(n_str)
    except ValueError:
        raise ParameterError("sharding", "shard", text, "is not of the form i/n",
                             f"give e.g. {param('shard', '0/4')} (0-based shard index, "
                             "shard count)") from None
    if n < 1 or not 0 <= i < n:
        raise ParameterError("sharding", "shard", text, "must satisfy 0 <= i < n",
                             "shards are numbered 0..n-1")
    return i, n


def write_store_header(attrs: Any, provenance: Mapping[str, Any] | None, **fields: Any) -> None:
    """The root attributes every store carries (schema.py): ``format``, ``schema``,
    ``created``, ``reidcli_version``, ``provenance`` and ``fields`` (e.g. ``dataset``)."""
    write_header(attrs, format=STORE_FORMAT, provenance=provenance, schema=SCHEMA_VERSION,
                 **fields)


def write_adapt_group(h5: h5py.File, method: str, arrays: Mapping[str, Any],
                      attrs: Mapping[str, Any]) -> h5py.Group:
    """``/adapt/<method>/``: one dataset per array (a key ``bn/<param>`` makes a subgroup) and
    one attribute per entry of ``attrs`` (dicts and lists as JSON). Replaces an existing group
    of the method."""
    parent = h5.require_group(ADAPT)
    if method in parent:
        del parent[method]
    group = parent.create_group(method)
    for key, value in attrs.items():
        group.attrs[key] = json.dumps(value, default=str) if isinstance(value, (dict, list)) \
            else value
    for key, value in arrays.items():
        group.create_dataset(key, data=np.asarray(value))
    return group


def verify_store(path: Path) -> None:
    """The ``verify`` of a store's :class:`reidcli.io.AtomicOutput`: the written file opens
    with h5py and passes every check of the reader (:class:`reidcli.store.reader.FeatureStore`,
    docs/formats.md "What the reader checks"), so no store is renamed onto its path that
    every reader would refuse."""
    from reidcli.store.reader import FeatureStore

    verify_hdf5(RECORDS, FEATURES, format=STORE_FORMAT)(path)
    # locking=False: see reidcli.io.verify_hdf5 (this process wrote the file)
    FeatureStore(path, locking=False).close()


def shard_rows(num_rows: int, shard: tuple[int, int]) -> slice:
    """The contiguous row range of shard ``i`` of ``n`` over ``num_rows`` records."""
    i, n = shard
    bounds = np.linspace(0, num_rows, n + 1).round().astype(int)
    return slice(int(bounds[i]), int(bounds[i + 1]))


class StoreWriter:
    """Write one feature store atomically (context manager).

    Parameters
    ----------
    path: output ``.h5`` path.
    records: the record table of the N rows (docs/datasets.md).
    dataset: registry name of the dataset ("" when unknown, e.g. imported features).
    provenance: dict from :func:`reidcli.provenance.make_provenance` (made if omitted).
    force: overwrite an existing output.
    option: the parameter that names the output in errors (``out``; the CLI shows its flag).
    shard: ``(i, n)`` when this store is shard i of n of a larger record table;
        ``shard_source`` then carries ``{"num_rows", "records_sha256"}`` of the whole table.
    """

    def __init__(self, path: str | os.PathLike, records: pd.DataFrame, *, dataset: str = "",
                 provenance: Mapping[str, Any] | None = None, force: bool = False,
                 shard: tuple[int, int] | None = None,
                 shard_source: Mapping[str, Any] | None = None,
                 attrs: Mapping[str, Any] | None = None, option: str = "out",
                 inputs: Sequence[str | os.PathLike] = ()):
        self._out = AtomicOutput(path, force=force, option=option, inputs=inputs,
                                 verify=verify_store)
        self.path = self._out.final
        self.tmp = self._out.tmp
        self.num_rows = len(records)
        #: protocol indices of a shard refer to the rows of the whole (unsharded) table
        self.index_rows = int((shard_source or {}).get("num_rows", self.num_rows)) \
            if shard is not None else self.num_rows
        self._positions: dict[str, int] = {}
        self.h5: h5py.File | None = None
        #: datasets held open until commit, so a failed chunk write surfaces in flush()
        #: instead of being swallowed when h5py closes the dataset in a destructor
        self._datasets: dict[str, h5py.Dataset] = {}
        try:
            with output_errors(self._out.what):
                self.h5 = h5py.File(self.tmp, "w")
            root = self.h5.attrs
            write_store_header(root, provenance or make_provenance(), dataset=dataset or "")
            root["num_rows"] = self.num_rows
            root["complete"] = False        # set True by commit(); readers refuse False
            root["records_sha256"] = records_digest(records)
            if shard is not None:
                root["shard_index"], root["shard_count"] = shard
                root["shard_source"] = json.dumps(dict(shard_source or {}))
            for key, value in (attrs or {}).items():
                root[key] = value
            write_records(self.h5.create_group(RECORDS), records)
            self.h5.create_group(FEATURES)
            with output_errors(self._out.what):
                self.h5.flush()
        except BaseException:
            self.abort()
            raise

    # -- features ----------------------------------------------------------------------
    def add_feature(self, name: str, dim: int, *, metric: str = "euclidean",
                    normalized: bool = False, attrs: Mapping[str, Any] | None = None) -> None:
        """Create ``/features/<name>`` float32 [N, dim], filled later by :meth:`append_feature`."""
        if metric not in METRICS:
            raise UsageError(f"metric {metric!r} is not one of {', '.join(METRICS)}",
                             "use euclidean or cosine")
        if dim < 1:
            raise UsageError(f"feature {name!r} has dimension {dim}", "dimension must be ≥ 1")
        # contiguous rows (no chunks): a reader may map them straight from the page cache
        # (FeatureStore.features)
        ds = self.h5[FEATURES].create_dataset(name, shape=(self.num_rows, dim),
                                              dtype=np.dtype("<f4"), chunks=None)
        self._datasets[f"{FEATURES}/{name}"] = ds      # kept open: flush() reports its errors
        ds.attrs["metric"] = metric
        ds.attrs["normalized"] = bool(normalized)
        for key, value in (attrs or {}).items():
            ds.attrs[key] = value
        self._positions[f"{FEATURES}/{name}"] = 0

    def append_feature(self, name: str, block: np.ndarray) -> None:
        """Append ``block`` [b, dim] after the rows written so far."""
        self._append(f"{FEATURES}/{name}", np.asarray(block, dtype=np.float32))

    def set_feature(self, name: str, array: np.ndarray, *, metric: str = "euclidean",
                    normalized: bool = False, attrs: Mapping[str, Any] | None = None) -> None:
        """Write a whole feature matrix [N, D] at once."""
        array = np.asarray(array)
        if array.ndim != 2:
            raise UsageError(f"feature {name!r} must be 2-D [N, D], got shape {array.shape}",
                             "reshape it to one row per record")
        self.add_feature(name, array.shape[1], metric=metric, normalized=normalized,
                         attrs=attrs)
        self.append_feature(name, array)

    # -- conv maps ---------------------------------------------------------------------
    def add_convmap(self, layer: str, shape_chw: Sequence[int], *, dtype: str = "float16",
                    attrs: Mapping[str, Any] | None = None) -> None:
        """Create ``/convmaps/<layer>`` [N, C, H, W], chunked per sample."""
        c, h, w = (int(v) for v in shape_chw)
        group = self.h5.require_group(CONVMAPS)
        ds = group.create_dataset(layer, shape=(self.num_rows, c, h, w), dtype=np.dtype(dtype),
                                  chunks=(1, c, h, w) if self.num_rows else None)
        self._datasets[f"{CONVMAPS}/{layer}"] = ds
        for key, value in (attrs or {}).items():
            ds.attrs[key] = value
        self._positions[f"{CONVMAPS}/{layer}"] = 0

    def append_convmap(self, layer: str, block: np.ndarray) -> None:
        """Append conv maps ``block`` [b, C, H, W]."""
        ds = self.h5[f"{CONVMAPS}/{layer}"]
        self._append(f"{CONVMAPS}/{layer}", np.asarray(block, dtype=ds.dtype))

    def _append(self, key: str, block: np.ndarray) -> None:
        if key not in self._positions:
            raise KeyError(f"{key} was not created; call add_feature/add_convmap first")
        ds = self.h5[key]
        if block.shape[1:] != ds.shape[1:]:
            raise UsageError(f"{key}: block shape {block.shape[1:]} differs from {ds.shape[1:]}",
                             "every block must have the dataset's per-row shape")
        start = self._positions[key]
        stop = start + block.shape[0]
        if stop > self.num_rows:
            raise StoreError(f"{key}: {stop} rows written for a store of {self.num_rows}",
                             "write exactly one row per record")
        ds[start:stop] = block
        self._positions[key] = stop

    # -- protocol and adaptation ---------------------------------------------------------
    def write_protocol(self, name: str, trials: Sequence[Mapping[str, Any]], *,
                       eval_rule: str = "market", options: Mapping[str, Any] | None = None
                       ) -> None:
        """Write ``/protocol`` with one ``trial_<k>`` group per trial (arrays of TRIAL_ARRAYS)."""
        group = self.h5.create_group(PROTOCOL)
        group.attrs["name"] = name
        group.attrs["eval_rule"] = eval_rule
        group.attrs["options"] = json.dumps(dict(options or {}), default=str)
        group.attrs["num_trials"] = len(trials)
        for k, trial in enumerate(trials):
            tg = group.create_group(trial_name(k))
            for key, value in trial.items():
                arr = np.asarray(value)
                if key.endswith("_idx"):
                    arr = arr.astype(np.int64)
                    if len(arr) and (arr.min() < 0 or arr.max() >= self.index_rows):
                        raise StoreError(f"protocol trial {k}: {key} outside "
                                         f"0..{self.index_rows - 1}",
                                         "indices refer to store rows")
                tg.create_dataset(key, data=arr)
            for key in ("query_idx", "gallery_idx"):
                if key not in tg:
                    raise StoreError(f"protocol trial {k} lacks {key}",
                                     f"every trial needs {', '.join(TRIAL_ARRAYS[2:4])}")

    def write_adapt(self, method: str, arrays: Mapping[str, np.ndarray],
                    hyperparameters: Mapping[str, Any] | None = None) -> None:
        """Write ``/adapt/<method>/`` with the adaptation's learned arrays
        (:func:`write_adapt_group`, attribute ``hyperparameters``)."""
        write_adapt_group(self.h5, method, arrays,
                          {"hyperparameters": dict(hyperparameters or {})})

    # -- finish --------------------------------------------------------------------------
    def incomplete(self) -> list[str]:
        """Datasets with fewer rows written than records."""
        return [f"{k} ({p}/{self.num_rows} rows)" for k, p in self._positions.items()
                if p != self.num_rows]

    def commit(self) -> Path:
        """Check every dataset is complete, flush and close (errors at close are errors), then
        fsync, re-open and check, and move the store onto its path (reidcli.io.AtomicOutput).
        A full disk is one OutputError naming "disk full"; nothing is left behind."""
        missing = self.incomplete()
        if missing:
            self.abort()
            raise StoreError(f"store {self.path} is incomplete: {', '.join(missing)}",
                             "write one row per record before closing")
        try:
            with output_errors(self._out.what):
                self.h5.flush()                        # chunk caches: ENOSPC raised here
                self._out.raise_swallowed()
                self.h5.attrs["complete"] = True
                self.h5.flush()
                self._datasets.clear()
                h5, self.h5 = self.h5, None
                h5.close()
        except BaseException:
            self.abort()
            raise
        return self._out.commit()

    def abort(self) -> None:
        """Close and delete the partial file (a failing close is ignored: the file goes)."""
        h5, self.h5 = self.h5, None
        try:
            # closing a dataset whose chunks cannot be written (full disk) makes h5py print a
            # traceback from a destructor; the file is deleted anyway, so keep stderr clean
            with contextlib.redirect_stderr(StringIO()):
                self._datasets.clear()
                if h5 is not None:
                    try:
                        h5.close()
                    except Exception:
                        note_hdf5_close_failed()   # the file is removed below anyway
        finally:
            self._out.abort()

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
            return
        self.abort()
        if isinstance(exc, Exception):
            err = output_error(exc, self._out.what)        # ENOSPC mid-write → "disk full"
            if err is not None and err is not exc:
                raise err from exc
