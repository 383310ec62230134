"""Writing and reading the record table as one HDF5 dataset per column.

Reading has two forms: :func:`read_record_columns` gives the columns as NumPy arrays (no
pandas: what `reid eval` needs to score a store), :func:`records_frame` turns them into the
record table (a pandas DataFrame, docs/datasets.md) for everything else.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Mapping

import h5py
import numpy as np

from reidcli.store.schema import KIND_BOOL, KIND_FLOAT, KIND_INT, KIND_JSON, KIND_STR

if TYPE_CHECKING:  # pragma: no cover - pandas is imported where a DataFrame is built
    import pandas as pd

_STR = h5py.string_dtype("utf-8")


def _column_kind(values: pd.Series) -> str:
    """The stored kind of an extra record column: from its dtype, else from its values."""
    import pandas as pd

    present = values[values.map(lambda v: v is not None and not (isinstance(v, float) and np.isnan(v)))]
    if pd.api.types.is_bool_dtype(values.dtype):
        return KIND_BOOL
    if pd.api.types.is_integer_dtype(values.dtype):
        return KIND_INT
    if pd.api.types.is_float_dtype(values.dtype):
        return KIND_FLOAT
    if not len(present):
        return KIND_STR
    return _object_kind(present, complete=len(present) == len(values))


def _object_kind(present: pd.Series, complete: bool) -> str:
    """The kind of the (non-empty) values ``present`` of an object column; ``complete``: no
    value of the column is missing (a bool or int column with gaps is not one)."""
    if all(isinstance(v, str) for v in present):
        return KIND_STR
    if all(isinstance(v, (bool, np.bool_)) for v in present) and complete:
        return KIND_BOOL
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in present):
        return KIND_INT if complete else KIND_FLOAT
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in present):
        return KIND_FLOAT
    return KIND_JSON


def write_records(group: h5py.Group, frame: pd.DataFrame) -> None:
    """Write every column of a (normalised) record table into ``group``."""
    import pandas as pd

    from reidcli.data.records import NO_FRAME, RECORD_COLUMNS, normalize_frame

    frame = normalize_frame(frame)
    n = len(frame)
    for col in frame.columns:
        values = frame[col]
        if col == "frame":
            data = values.fillna(NO_FRAME).to_numpy(dtype=np.int64)
            kind = KIND_INT
        elif col in ("pid", "camid"):
            data, kind = values.to_numpy(dtype=np.int64), KIND_INT
        elif col in RECORD_COLUMNS:
            data, kind = np.array(values.tolist(), dtype=object), KIND_STR
        else:
            kind = _column_kind(values)
            if kind == KIND_INT:
                data = values.to_numpy(dtype=np.int64)
            elif kind == KIND_FLOAT:
                data = pd.to_numeric(values).to_numpy(dtype=np.float64)
            elif kind == KIND_BOOL:
                data = values.to_numpy(dtype=bool)
            elif kind == KIND_STR:
                data = np.array(["" if not isinstance(v, str) else v for v in values],
                                dtype=object)
            else:
                data = np.array([json.dumps(v, default=str) for v in values], dtype=object)
        dtype = _STR if kind in (KIND_STR, KIND_JSON) else data.dtype
        ds = group.create_dataset(col, shape=(n,), dtype=dtype, data=data if n else None)
        ds.attrs["kind"] = kind


def column_kind(ds: h5py.Dataset) -> str:
    """How to rebuild a ``/records`` column (docs/formats.md, "/records/<col>"): inferred from
    the HDF5 dtype — strings (variable-length or fixed bytes) → ``str``, integers → ``int``,
    floats → ``float``, bools → ``bool``. The ``kind`` attribute reidcli writes is only a hint:
    it picks ``json`` for a string column and is otherwise ignored. ValueError for any other
    dtype (compound, opaque, ...)."""
    dtype = ds.dtype
    hint = ds.attrs.get("kind", "")
    hint = hint.decode(errors="replace") if isinstance(hint, bytes) else str(hint)
    if h5py.check_string_dtype(dtype) is not None or dtype.kind in "SU":
        return KIND_JSON if hint == KIND_JSON else KIND_STR
    if dtype.kind == "b":
        return KIND_BOOL
    if dtype.kind in "iu":
        return KIND_INT
    if dtype.kind == "f":
        return KIND_FLOAT
    raise ValueError(f"/records/{ds.name.rsplit('/', 1)[-1]} has dtype {dtype}, which is not "
                     "a string, integer, float or bool")


#: string columns of the record table and the value a store without them holds
#: (:func:`reidcli.data.records.normalize_frame`: modality visible, dataset "", domain =
#: dataset)
_STRING_DEFAULTS = (("modality", "visible"), ("dataset", ""))


def read_record_columns(group: h5py.Group) -> dict[str, np.ndarray]:
    """The record table's columns as NumPy arrays [N], without pandas: ``pid`` and ``camid``
    int64, ``path``/``split``/``modality``/``dataset``/``domain`` object arrays of str (the
    defaults of :func:`reidcli.data.records.normalize_frame` where a store lacks one),
    ``frame`` and ``x_<key>`` as stored (JSON decoded, empty extra strings → NaN).

    Each column's kind comes from its dtype (:func:`column_kind`), so a store written by
    another tool to docs/formats.md reads without reidcli's private attributes. KeyError
    naming the missing required columns; ValueError for a column that cannot be decoded."""
    cols: dict[str, np.ndarray] = {}
    decoded: set[str] = set()                 # columns that hold str values only
    for col in group:
        ds = group[col]
        kind = column_kind(ds)
        if kind in (KIND_STR, KIND_JSON):
            vals = ds.asstr()[:] if len(ds) else np.array([], dtype=object)
            vals = np.asarray(vals, dtype=object)
            if kind == KIND_JSON:
                vals = np.array([json.loads(v) for v in vals], dtype=object)
            elif col.startswith("x_"):
                vals = np.array([v if v != "" else np.nan for v in vals], dtype=object)
            else:
                decoded.add(col)
            cols[col] = vals
        else:
            cols[col] = ds[:]
    missing = [c for c in ("path", "pid", "camid", "split") if c not in cols]
    if missing:
        raise KeyError(", ".join(missing))
    n = len(cols["pid"])
    for col in ("pid", "camid"):
        cols[col] = np.asarray(cols[col]).astype(np.int64)
    for col, default in _STRING_DEFAULTS:
        if col not in cols:
            cols[col] = np.full(n, default, dtype=object)
            decoded.add(col)
    if "domain" not in cols:
        cols["domain"] = cols["dataset"].copy()
        if "dataset" in decoded:
            decoded.add("domain")
    for col in ("path", "split", "modality", "dataset", "domain"):   # as normalize_frame
        if col not in decoded:
            cols[col] = np.array([str(v) for v in cols[col]], dtype=object)
    return cols


def records_frame(columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The record table (a normalised DataFrame: ``frame`` -1 → <NA>) of
    :func:`read_record_columns`' arrays."""
    import pandas as pd

    from reidcli.data.records import normalize_frame

    return normalize_frame(pd.DataFrame(dict(columns)))


def read_records(group: h5py.Group) -> pd.DataFrame:
    """Read the record table back (``frame`` -1 → <NA>, empty extra strings → NaN): the
    DataFrame of :func:`read_record_columns`. KeyError naming the missing required columns;
    ValueError for a column that cannot be decoded."""
    return records_frame(read_record_columns(group))


def records_digest(frame: pd.DataFrame | Mapping[str, Any]) -> str:
    """sha256 over (path, pid, camid, split, domain) of every row, in order: one line
    ``path\tpid\tcamid\tsplit\tdomain\n`` per row (docs/formats.md, ``records_sha256``).
    ``frame``: the record table, or its columns (:func:`read_record_columns`)."""
    cols = [frame[c].tolist() for c in ("path", "pid", "camid", "split", "domain")]
    text = "".join(f"{a}\t{b}\t{c}\t{d}\t{e}\n" for a, b, c, d, e in zip(*cols))
    return hashlib.sha256(text.encode()).hexdigest()
