"""Label tables of ``reid store import``: label arrays (.npz, .mat, .npy) and label CSVs
→ a record table with exact int64 ``pid``, ``camid`` and ``frame`` (docs/formats.md,
"Importing")."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from reidcli.data.records import NO_FRAME
from reidcli.errors import InputFileError
from reidcli.naming import param
from reidcli.store.matfile import sniff

LABEL_COLUMNS = ("pid", "camid", "split")
OPTIONAL_COLUMNS = ("modality", "domain", "path", "dataset", "frame")
#: label columns that hold integers (``frame`` may be empty: no frame)
INTEGER_COLUMNS = ("pid", "camid", "frame")
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _text_array(values: np.ndarray) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).tolist()]


def _missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def _parse_int(value) -> int | None:
    """An exact Python int of one label value (int, integral float, or such text); None when
    it is not an integer."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            return None
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value) or value != np.floor(value):
            return None
        return int(value)
    return None


def integer_labels(values, key: str, source: str) -> np.ndarray:
    """Column ``key`` as int64 [N]: every value an exact integer in the int64 range (``frame``
    may be empty: :data:`NO_FRAME`). InputFileError naming ``source``, the column and the
    first bad row (0-based, in feature-row order) otherwise."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" and arr.size:
        if arr.dtype.kind == "u" and int(arr.max()) > INT64_MAX:
            row = int(np.argmax(arr > INT64_MAX))
            raise _bad_integer(source, key, row, arr[row], "is outside the int64 range")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and arr.size:       # MATLAB's doubles: vectorised check
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(arr) & (arr == np.floor(arr)) & (np.abs(arr) < 2.0 ** 63)
        if whole.all():
            return arr.astype(np.int64)
    if arr.dtype.kind in "USO" and arr.size:
        try:                                 # fast path: every value a plain integer text
            return np.asarray(arr, dtype=object).astype(str).astype(np.int64)
        except (ValueError, OverflowError, TypeError):
            pass                             # find and name the bad row below
    out = np.empty(len(arr), dtype=np.int64)
    for row, value in enumerate(arr.tolist()):
        if _missing(value):
            if key == "frame":
                out[row] = NO_FRAME
                continue
            raise _bad_integer(source, key, row, value, "is empty")
        number = _parse_int(value)
        if number is None:
            raise _bad_integer(source, key, row, value, "is not an integer")
        if not INT64_MIN <= number <= INT64_MAX:
            raise _bad_integer(source, key, row, value, "is outside the int64 range")
        out[row] = number
    return out


def _bad_integer(source: str, key: str, row: int, value, problem: str) -> InputFileError:
    shown = value.item() if isinstance(value, np.generic) else value
    return InputFileError(f"{source}: column {key}, row {row}: {shown!r} {problem}",
                          f"give {key} as integers (-2^63 .. 2^63-1)"
                          + (", or leave it empty for no frame" if key == "frame" else ""))


def labels_from_arrays(arrays: Mapping[str, np.ndarray], n: int, source: str) -> pd.DataFrame:
    """Record table from label arrays (each 1-D of length ``n``; a ``[1, n]`` or ``[n, 1]``
    matrix, as MATLAB saves vectors, counts as 1-D)."""
    missing = [c for c in LABEL_COLUMNS if c not in arrays]
    if missing:
        raise InputFileError(f"{source} lacks the array(s) {', '.join(missing)}",
                             "provide pid, camid and split (train|query|gallery|val) per row")
    cols = {}
    for key in LABEL_COLUMNS + OPTIONAL_COLUMNS:
        if key not in arrays:
            continue
        arr = np.asarray(arrays[key])
        if arr.ndim == 2 and 1 in arr.shape:
            arr = arr.ravel()
        if arr.ndim != 1 or len(arr) != n:
            raise InputFileError(f"{source}: {key} has shape {arr.shape}, expected ({n},)",
                                 "give one label per feature row")
        if key in INTEGER_COLUMNS:
            if arr.dtype.kind in "cmMVb":
                raise InputFileError(f"{source}: {key} has dtype {arr.dtype}",
                                     f"give {key} as integers")
            cols[key] = integer_labels(arr, key, source)
            continue
        cols[key] = _text_array(arr) if arr.dtype.kind in "USO" else arr
    return pd.DataFrame(cols)


def _check_extra_columns(columns, what: str) -> None:
    """Extra CSV columns become record columns ``x_<name>`` (docs/formats.md): a name with
    ``/`` (an HDF5 path separator) or an empty one cannot be stored."""
    for col in columns:
        name = str(col)
        if not name.strip() or "/" in name:
            raise InputFileError(f"{what}: column {name!r} cannot be a record column "
                                 "(empty name or '/' in it)",
                                 "rename or drop that column (extra columns are kept as "
                                 "x_<name>)")


_KIND_NAMES = {"npz": "an .npz archive", "npy": "an .npy array", "mat5": "a MATLAB .mat file",
               "mat73": "a MATLAB .mat file", "hdf5": "an HDF5 file"}


def read_label_csv(path: Path, n: int) -> pd.DataFrame:
    """Labels from a CSV with header ``pid,camid,split[,modality,domain,path,dataset,frame]``
    (extra columns are kept as ``x_<name>``)."""
    what = f"{param('labels_csv')} {path}"
    if not path.exists():
        raise InputFileError(f"{what} does not exist", "check the path")
    if path.is_dir():
        raise InputFileError(f"{what} is a folder", "give a CSV file")
    kind = sniff(path)
    if kind == "empty":
        raise InputFileError(f"{what} is empty (0 bytes)",
                             "write a header line pid,camid,split,... and one row per feature")
    if kind != "text":
        raise InputFileError(f"{what} is not a text CSV file (it looks like "
                             f"{_KIND_NAMES.get(kind, 'a binary file')})",
                             "write a header line pid,camid,split,... and one row per feature")
    try:
        # utf-8-sig: a byte-order mark (Excel) is not part of the first column's name
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig",
                            skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        why = " ".join(str(exc).split())[:160]
        raise InputFileError(f"{what} is not a readable CSV ({why})",
                             "write a header line pid,camid,split,...") from None
    frame.columns = [str(c).strip() for c in frame.columns]     # "pid, camid, split"
    if len(frame) != n:
        raise InputFileError(f"{what} has {len(frame)} rows but the features have {n}",
                             "give one label row per feature row, in the same order")
    extra = [c for c in frame.columns if c not in LABEL_COLUMNS + OPTIONAL_COLUMNS]
    _check_extra_columns(extra, what)
    labels = labels_from_arrays({c: frame[c].to_numpy(dtype=object) for c in frame.columns
                                 if c not in extra}, n, what)
    for col in extra:
        labels[f"x_{col}"] = _csv_extra(frame[col])
    return labels


def _csv_extra(values: pd.Series) -> pd.Series:
    """An extra CSV column read as text: numbers where every value is one (empty → NaN)."""
    numbers = pd.to_numeric(values.replace("", np.nan), errors="coerce")
    if numbers.notna().sum() == (values != "").sum():
        return numbers
    return values.replace("", np.nan)


__all__ = ["INTEGER_COLUMNS", "LABEL_COLUMNS", "OPTIONAL_COLUMNS", "integer_labels",
           "labels_from_arrays", "read_label_csv"]
