"""Reading feature stores: validated on open, lazy per-row / per-block access."""
from __future__ import annotations

import dataclasses
import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import h5py
import numpy as np

from reidcli.errors import ReidError, StoreError, StoreLockedError, TrialArrayMissingError
from reidcli.naming import param
from reidcli.store.records_io import (column_kind, read_record_columns, records_digest,
                                      records_frame)
from reidcli.store.schema import (ADAPT, CONVMAPS, FEATURES, KIND_INT, KIND_STR, METRICS,
                                  PROTOCOL, RECORD_COLUMNS, RECORDS, REQUIRED_COLUMNS,
                                  SCHEMA_VERSION, STORE_FORMAT, trial_index)

if TYPE_CHECKING:  # pragma: no cover - pandas loads only when .records is asked for
    import pandas as pd


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


class TrialArrays(dict):
    """The arrays of one protocol trial; a missing one (e.g. ``train_idx`` of a store whose
    protocol only scores) is a :class:`TrialArrayMissingError` naming the store and trial."""

    def __init__(self, arrays: dict, *, store: Path, trial: str):
        super().__init__(arrays)
        self._store, self._trial = store, trial

    def __missing__(self, key):
        raise TrialArrayMissingError(
            f"store {self._store}: /protocol/{self._trial} has no {key}",
            "write it into the store's protocol (docs/formats.md, /protocol)")


#: h5py/HDF5 errors that mean the file's metadata or data cannot be read
_H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError,
              AttributeError, UnicodeDecodeError)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:159] + "…"


def _text_attr(value) -> str | None:
    """A string attribute (str, bytes or a 0-d string array) as str; None otherwise."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "SUO":
        return _text_attr(value[()])
    return value if isinstance(value, str) else None


def _int_attr(value) -> int | None:
    """An integer attribute (Python or numpy scalar, not bool); None otherwise."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return int(value)


class FeatureStore:
    """An open feature store (use :func:`open_store`).

    ``records`` is the record table (N rows, a pandas DataFrame built on first use);
    ``record_columns`` holds the same columns as NumPy arrays (no pandas); features are read
    lazily by row index.
    Opening validates the whole layout of docs/formats.md ("What the reader checks"):
    structure, dtypes, shapes, protocol index ranges and the records digest; anything else
    raises :class:`StoreError` naming the store.
    """

    def __init__(self, path: str | os.PathLike, *, locking: bool | None = None):
        self.path = Path(path)
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist",
                             "check the path, or create it with reid extract / reid store import")
        if self.path.is_dir():
            raise StoreError(f"store {self.path} is a directory",
                             "give the store's .h5 file")
        try:
            self.h5 = h5py.File(self.path, "r") if locking is None else \
                h5py.File(self.path, "r", locking=locking)
        except OSError as exc:
            text = str(exc).lower()
            if "unable to lock file" in text or "file locking" in text \
                    or isinstance(exc, BlockingIOError):
                raise StoreLockedError(
                    f"store {self.path} is in use by another process (it is locked for "
                    "writing)", "wait until that process has finished writing it") from None
            raise self._damaged(exc) from None
        except _H5_ERRORS as exc:
            raise self._damaged(exc) from None
        try:
            self._validate()
        except ReidError:
            self.h5.close()
            raise
        except _H5_ERRORS as exc:
            self.h5.close()
            raise self._damaged(exc) from None
        except BaseException:
            self.h5.close()
            raise

    def _damaged(self, exc: BaseException | None = None) -> StoreError:
        """The one-line error of a store whose HDF5 structures cannot be read."""
        why = f" ({_one_line(exc)})" if exc is not None and str(exc).strip() else ""
        return StoreError(f"store {self.path} is damaged or not an HDF5 file{why}",
                          "re-create it with reid extract / reid store import")

    def _bad(self, what: str, todo: str = "the file is damaged; re-create it") -> StoreError:
        return StoreError(f"store {self.path}: {what}", todo)

    def _validate(self) -> None:
        """Check the layout of docs/formats.md; read the records once and verify their digest."""
        # every root attribute is read here once, so a damaged one fails at open, not later
        self._root_attrs = {k: (v.decode() if isinstance(v, bytes) else v)
                            for k, v in self.h5.attrs.items()}
        fmt = self.h5.attrs.get("format")
        fmt = _text_attr(fmt) if fmt is not None else None
        if fmt != STORE_FORMAT:
            raise StoreError(f"{self.path} is not a reidcli feature store (format={fmt!r})",
                             f"expected format={STORE_FORMAT!r}; create it with reid extract "
                             "or reid store import")
        raw_schema = self.h5.attrs.get("schema")
        schema = _int_attr(raw_schema)
        if schema is None and raw_schema is not None:
            text = _text_attr(raw_schema)
            schema = int(text) if text is not None and text.strip().isdigit() else None
            if schema is None:
                schema = str(text if text is not None else raw_schema)
        if schema is None or schema != SCHEMA_VERSION:
            hint = ("upgrade reidcli" if isinstance(schema, int) and schema > SCHEMA_VERSION
                    else "re-create the store with this reidcli")
            raise StoreError(f"store {self.path} has schema {schema}, this reidcli reads "
                             f"schema {SCHEMA_VERSION}", hint)
        if "complete" in self.h5.attrs:
            complete = np.asarray(self.h5.attrs["complete"])
            if complete.shape != () or complete.dtype.kind not in "biu" or not bool(complete):
                raise StoreError(f"store {self.path} was not completely written (interrupted)",
                                 "re-run the command that writes it")
        self._validate_shard()
        n = self._validate_records()
        self._validate_arrays(n)
        self._validate_protocol(n)
        self._validate_digest()

    def _validate_shard(self) -> None:
        attrs = self.h5.attrs
        if "shard_index" not in attrs and "shard_count" not in attrs:
            return
        i, k = _int_attr(attrs.get("shard_index")), _int_attr(attrs.get("shard_count"))
        if i is None or k is None or k < 1 or not 0 <= i < k:
            raise self._bad("shard_index/shard_count are not integers 0 <= i < n")
        if "shard_source" in attrs:
            source = _text_attr(attrs["shard_source"])
            try:
                parsed = json.loads(source) if source is not None else None
            except json.JSONDecodeError:
                parsed = None
            if not isinstance(parsed, dict) or (
                    parsed.get("num_rows") is not None
                    and _int_attr(parsed["num_rows"]) is None):
                raise self._bad("attribute shard_source is not a JSON object "
                                "{num_rows, records_sha256}")

    def _validate_records(self) -> int:
        """Structure and dtypes of ``/records``; returns N."""
        if RECORDS not in self.h5 or not isinstance(self.h5[RECORDS], h5py.Group):
            raise StoreError(f"store {self.path} has no /records group",
                             "the file is damaged; re-create it")
        group = self.h5[RECORDS]
        missing = [c for c in REQUIRED_COLUMNS if c not in group]
        if missing:
            raise StoreError(f"store {self.path} lacks the record column(s) "
                             f"{', '.join(missing)}", "the file is damaged; re-create it")
        n = self._record_count(group)
        for col in group:
            self._validate_record_column(col, group[col], n)
        return n

    def _record_count(self, group: h5py.Group) -> int:
        """N from the ``num_rows`` attribute, else the length of ``/records/pid`` (-1 when
        that is not a 1-D dataset)."""
        if "num_rows" in self.h5.attrs:
            n = _int_attr(self.h5.attrs["num_rows"])
            if n is None or n < 0:
                raise self._bad(f"attribute num_rows={self.h5.attrs['num_rows']!r} is not a "
                                "row count")
            return n
        pid = group["pid"]
        return int(pid.shape[0]) if isinstance(pid, h5py.Dataset) and pid.ndim == 1 else -1

    def _validate_record_column(self, col: str, ds, n: int) -> None:
        """``/records/<col>``: a known column (or ``x_<key>``), a dataset of shape [N] whose
        values have the column's kind."""
        if not isinstance(ds, h5py.Dataset):
            raise self._bad(f"/records/{col} is not a dataset")
        if col not in RECORD_COLUMNS and not col.startswith("x_"):
            raise self._bad(f"/records/{col} is not a record column",
                            "record columns are path, pid, camid, split, modality, "
                            "dataset, domain, frame and x_<key> (docs/formats.md)")
        if ds.shape != (n,):
            rows = ds.shape[0] if ds.ndim else "scalar"
            raise StoreError(f"store {self.path}: /records/{col} has "
                             f"{rows} rows" + (f", expected {n}" if n >= 0 else "")
                             + ("" if ds.ndim == 1 else f" (shape {ds.shape})"),
                             "the file is damaged; re-create it")
        try:
            kind = column_kind(ds)
        except ValueError as exc:
            raise self._bad(str(exc)) from None
        if col in ("pid", "camid", "frame") and kind != KIND_INT:
            raise self._bad(f"/records/{col} has dtype {ds.dtype}, expected integers")
        if col in RECORD_COLUMNS and col not in ("pid", "camid", "frame") \
                and kind != KIND_STR:
            raise self._bad(f"/records/{col} has dtype {ds.dtype}, expected strings")

    def _validate_arrays(self, n: int) -> None:
        """``/features`` [N, D] float with D ≥ 1, ``/convmaps`` [N, C, H, W] float, ``/adapt``."""
        for group, ndim, what in ((FEATURES, 2, "[N, D]"), (CONVMAPS, 4, "[N, C, H, W]")):
            if group not in self.h5:
                continue
            if not isinstance(self.h5[group], h5py.Group):
                raise self._bad(f"/{group} is not a group")
            for name in self.h5[group]:
                ds = self.h5[group][name]
                if not isinstance(ds, h5py.Dataset):
                    raise self._bad(f"/{group}/{name} is not a dataset")
                if ds.ndim != ndim:
                    raise self._bad(f"/{group}/{name} has shape {ds.shape}, expected {what}")
                if ds.shape[0] != n:
                    raise StoreError(f"store {self.path}: /{group}/{name} has "
                                     f"{ds.shape[0]} rows, expected {n}",
                                     "the file is damaged; re-create it")
                if 0 in ds.shape[1:]:
                    raise self._bad(f"/{group}/{name} has shape {ds.shape} (width 0)",
                                    "re-create the store with non-empty features")
                if ds.dtype.kind != "f":
                    raise self._bad(f"/{group}/{name} has dtype {ds.dtype}, expected floats")
                if group == FEATURES:
                    self._validate_feature_attrs(name, ds)
        if ADAPT in self.h5:
            adapt = self.h5[ADAPT]
            if not isinstance(adapt, h5py.Group) or not all(
                    isinstance(adapt[m], h5py.Group) for m in adapt):
                raise self._bad(f"/{ADAPT} is not a group of one group per method")

    def _validate_feature_attrs(self, name: str, ds: h5py.Dataset) -> None:
        attrs = ds.attrs
        if "metric" in attrs and _text_attr(attrs["metric"]) not in METRICS:
            raise self._bad(f"/features/{name} has metric {attrs['metric']!r}",
                            f"metric must be one of {', '.join(METRICS)}")
        if "normalized" in attrs:
            value = np.asarray(attrs["normalized"])
            if value.shape != () or value.dtype.kind not in "biu":
                raise self._bad(f"/features/{name} has normalized={attrs['normalized']!r}",
                                "normalized must be a boolean")
        if "n_parts" in attrs and (_int_attr(attrs["n_parts"]) is None
                                   or _int_attr(attrs["n_parts"]) < 1):
            raise self._bad(f"/features/{name} has n_parts={attrs['n_parts']!r}",
                            "n_parts must be a positive integer")

    def _index_bound(self, n: int) -> int | None:
        """Row count protocol indices refer to: N, or the whole table's for a shard (None
        when a shard does not record it)."""
        if "shard_index" not in self.h5.attrs:
            return n
        source = json.loads(_text_attr(self.h5.attrs.get("shard_source", "{}")) or "{}")
        rows = source.get("num_rows")
        return None if rows is None else int(rows)

    def _validate_protocol(self, n: int) -> None:
        """``/protocol``: trial groups ``trial_0 … trial_<n−1>``, each with 1-D integer
        ``query_idx``/``gallery_idx`` (and optional ``train_idx``) in ``0 … N−1``."""
        if PROTOCOL not in self.h5:
            return
        group = self.h5[PROTOCOL]
        if not isinstance(group, h5py.Group):
            raise self._bad(f"/{PROTOCOL} is not a group")
        for key in ("name", "eval_rule"):
            if key in group.attrs and _text_attr(group.attrs[key]) is None:
                raise self._bad(f"/{PROTOCOL} attribute {key} is not a string")
        keys = sorted((k for k in group if trial_index(k) is not None), key=trial_index)
        if [trial_index(k) for k in keys] != list(range(len(keys))):
            raise self._bad(f"/{PROTOCOL} has trial groups {', '.join(keys)}",
                            "trial groups must be named trial_0 … trial_<n-1>")
        bound = self._index_bound(n)
        for key in keys:
            trial = group[key]
            if not isinstance(trial, h5py.Group):
                raise self._bad(f"/{PROTOCOL}/{key} is not a group")
            for name in trial:
                if not isinstance(trial[name], h5py.Dataset):
                    raise self._bad(f"/{PROTOCOL}/{key}/{name} is not a dataset")
            for name in ("query_idx", "gallery_idx"):
                if name not in trial:
                    raise self._bad(f"/{PROTOCOL}/{key} has no {name}",
                                    "every trial needs query_idx and gallery_idx "
                                    "(docs/formats.md, /protocol)")
            for name in (k for k in trial if k.endswith("_idx")):
                self._check_index_array(f"/{PROTOCOL}/{key}/{name}", trial[name], bound)

    def _check_index_array(self, where: str, ds: h5py.Dataset, bound: int | None) -> None:
        if ds.ndim != 1:
            raise self._bad(f"{where} has shape {ds.shape}, expected 1-D row indices",
                            "indices are int64 store rows (docs/formats.md, /protocol)")
        if ds.dtype.kind not in "iu" and not (ds.shape[0] == 0 and ds.dtype.kind in "fb"):
            raise self._bad(f"{where} has dtype {ds.dtype}, expected integer row indices",
                            "indices are int64 store rows (docs/formats.md, /protocol)")
        values = ds[()]
        if values.size == 0:
            return
        low, high = int(values.min()), int(values.max())
        top = "N-1" if bound is None else str(bound - 1)
        if low < 0 or (bound is not None and high >= bound):
            bad = low if low < 0 else high
            raise self._bad(f"{where} holds row index {bad} outside 0..{top}",
                            "indices refer to store rows (docs/formats.md, /protocol)")

    def _validate_digest(self) -> None:
        """Read the record table once and compare it with ``records_sha256`` (a foreign store
        without that attribute is accepted)."""
        columns = self.record_columns
        if "records_sha256" not in self.h5.attrs:
            return
        stored = _text_attr(self.h5.attrs["records_sha256"])
        if stored is None or stored != records_digest(columns):
            raise StoreError(f"store {self.path}: records digest mismatch",
                             "the file is damaged; re-create it with the command that wrote it")

    # -- metadata -------------------------------------------------------------------------
    @property
    def attrs(self) -> dict[str, Any]:
        """The root attributes (read and checked when the store was opened)."""
        return dict(self._root_attrs)

    @property
    def num_rows(self) -> int:
        if "num_rows" in self.h5.attrs:
            return int(_int_attr(self.h5.attrs["num_rows"]))
        return int(self.h5[RECORDS]["pid"].shape[0])

    @property
    def dataset(self) -> str | None:
        """Registry name of the dataset, or None when unknown (e.g. imported features)."""
        value = _text_attr(self.h5.attrs.get("dataset", ""))
        return value or None

    @property
    def provenance(self) -> dict[str, Any]:
        raw = self.attrs.get("provenance", "{}")
        try:
            return json.loads(raw)
        except (TypeError, json.JSONDecodeError):
            return {}

    @cached_property
    def record_columns(self) -> dict[str, np.ndarray]:
        """The record table's columns as read-only NumPy arrays [N] (read once when the store
        is opened, cached; no pandas): ``pid``/``camid`` int64, the string columns as object
        arrays of str (:func:`reidcli.store.records_io.read_record_columns`)."""
        try:
            columns = read_record_columns(self.h5[RECORDS])
        except KeyError as exc:
            raise StoreError(f"store {self.path} lacks the record column(s) {exc.args[0]}",
                             "the file is damaged; re-create it") from None
        except (ValueError, TypeError) as exc:      # undecodable strings, JSON, values
            raise self._bad(f"the record table cannot be read ({_one_line(exc)})") from None
        for values in columns.values():
            values.setflags(write=False)
        return columns

    @cached_property
    def records(self) -> pd.DataFrame:
        """The record table, N rows (a DataFrame of :attr:`record_columns`, built on first
        use and cached)."""
        try:
            return records_frame(self.record_columns)
        except (ValueError, TypeError) as exc:      # values pandas cannot coerce
            raise self._bad(f"the record table cannot be read ({_one_line(exc)})") from None

    def split_rows(self, split: str) -> np.ndarray:
        """Row indices (int64, ascending) whose ``split`` equals ``split``."""
        return np.flatnonzero(self.record_columns["split"] == split).astype(np.int64)

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

    def feature_attrs(self, name: str | None = None) -> dict[str, Any]:
        """Every attribute of a feature (``metric``, ``feat_norm``, ``n_parts``, ``adapted_by``
        …; docs/formats.md), bytes decoded to str."""
        ds = self.h5[FEATURES][self.require_feature(name)]
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in ds.attrs.items()}

    def features(self, name: str | None = None, rows: np.ndarray | slice | None = None
                 ) -> np.ndarray:
        """Feature rows as float32 [len(rows), D]; ``rows`` None = all, any int index order.

        All rows or a slice of a feature stored contiguously (as reidcli writes it) come
        back as a copy-on-write map of the file (:func:`mapped_rows`): the page cache's
        pages, no copy; writing to the array changes this process's copy only."""
        ds = self.h5[FEATURES][self.require_feature(name)]
        mapped = mapped_rows(self.path, ds, rows)
        if mapped is not None:
            return mapped
        return self._read(ds, rows).astype(np.float32, copy=False)

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
        return self._read(self.h5[CONVMAPS][layer], rows)

    def _read(self, ds: h5py.Dataset, rows: np.ndarray | slice | None) -> np.ndarray:
        """:func:`_read_rows`, with an HDF5 read failure (damaged chunk) as a StoreError."""
        try:
            return _read_rows(ds, rows)
        except (OSError, RuntimeError) as exc:
            raise self._damaged(exc) from None

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
        trials = [TrialArrays({name: group[k][name][()] for name in group[k]},
                              store=self.path, trial=k) for k in keys]
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
        try:
            return {k: group[k][()] for k in group}
        except (OSError, RuntimeError) as exc:
            raise self._damaged(exc) from None

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


def mapped_rows(path: Path, ds: h5py.Dataset, rows: slice | np.ndarray | None
                ) -> np.ndarray | None:
    """Rows ``rows`` (None: all; a slice of step 1) of the 2-D float32 little-endian dataset
    ``ds`` of the file ``path`` as a copy-on-write memory map [n, D], or None where the layout
    does not allow one: chunked or not yet written storage, a userblock, a driver other than
    the POSIX one, or a map whose first and last rows differ from what HDF5 reads (checked:
    two rows).

    Reading 160 MB of features into new memory costs 10–300 ms on a virtual machine (every
    page is first touched); the map reuses the page cache (docs/performance.md)."""
    if rows is not None and not isinstance(rows, slice):
        return None
    if ds.ndim != 2 or ds.dtype != np.dtype("<f4"):
        return None
    start, stop, step = (rows or slice(None)).indices(ds.shape[0])
    if step != 1 or stop <= start or ds.shape[1] == 0:
        return None
    try:
        offset = ds.id.get_offset()
        if offset is None or ds.file.userblock_size or ds.file.driver != "sec2":
            return None
        row_bytes = ds.shape[1] * 4
        mapped = np.memmap(path, dtype="<f4", mode="c", offset=offset + start * row_bytes,
                           shape=(stop - start, ds.shape[1]))
        if mapped[0].tobytes() != ds[start].tobytes() or \
                mapped[-1].tobytes() != ds[stop - 1].tobytes():
            return None
    except (OSError, ValueError, RuntimeError):
        return None
    return mapped.view(np.ndarray)


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
    elif uniq[-1] - uniq[0] + 1 <= 4 * len(uniq):  # dense in its span: one slice, then take
        block = ds[int(uniq[0]):int(uniq[-1]) + 1][uniq - uniq[0]]
    else:
        block = ds[uniq]
    return block[inverse]
