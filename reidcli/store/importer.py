"""Build a store from embeddings made by any other tool (``reid store import``).

Sources: one ``.npz`` with arrays ``features``, ``pid``, ``camid``, ``split`` and optional
``modality``, ``domain``, ``path``, ``dataset``; or a features ``.npy`` plus labels given as
``.npy`` arrays or as a CSV with those columns.
"""
from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from reidcli.data.records import validate_frame
from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.naming import param
from reidcli.provenance import make_provenance
from reidcli.store.schema import METRICS
from reidcli.store.writer import StoreWriter

LABEL_COLUMNS = ("pid", "camid", "split")
#: what numpy raises on a truncated or corrupt .npy/.npz (a zip member is read lazily)
_NUMPY_READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
                      KeyError, UnicodeDecodeError)
OPTIONAL_COLUMNS = ("modality", "domain", "path", "dataset", "frame")


def _load_array(path: Path, parameter: str) -> np.ndarray:
    if not path.exists():
        raise InputFileError(f"{param(parameter)} {path} does not exist", "check the path")
    try:
        return np.load(path, allow_pickle=False)
    except _NUMPY_READ_ERRORS as exc:
        raise InputFileError(f"{param(parameter)} {path} is not a readable .npy file ({exc})",
                             "save it with numpy.save") from None


def _label_arrays_hint() -> str:
    """The label arrays a features ``.npy`` needs (``label_arrays`` keys; flags on the CLI)."""
    return "label arrays " + " ".join(param(k, f"{k}.npy") for k in LABEL_COLUMNS)


def _text_array(values: np.ndarray) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).tolist()]


def labels_from_arrays(arrays: Mapping[str, np.ndarray], n: int, source: str) -> pd.DataFrame:
    """Record table from label arrays (each 1-D of length ``n``)."""
    missing = [c for c in LABEL_COLUMNS if c not in arrays]
    if missing:
        raise InputFileError(f"{source} lacks the array(s) {', '.join(missing)}",
                             "provide pid, camid and split (train|query|gallery|val) per row")
    cols = {}
    for key in LABEL_COLUMNS + OPTIONAL_COLUMNS:
        if key not in arrays:
            continue
        arr = np.asarray(arrays[key])
        if arr.ndim != 1 or len(arr) != n:
            raise InputFileError(f"{source}: {key} has shape {arr.shape}, expected ({n},)",
                                 "give one label per feature row")
        if key in ("pid", "camid", "frame") and arr.dtype.kind in "cmMV":
            raise InputFileError(f"{source}: {key} has dtype {arr.dtype}",
                                 f"give {key} as integers")
        cols[key] = _text_array(arr) if arr.dtype.kind in "USO" else arr
    return pd.DataFrame(cols)


def read_label_csv(path: Path, n: int) -> pd.DataFrame:
    """Labels from a CSV with header ``pid,camid,split[,modality,domain,path,dataset]``."""
    what = f"{param('labels_csv')} {path}"
    if not path.exists():
        raise InputFileError(f"{what} does not exist", "check the path")
    try:
        frame = pd.read_csv(path, dtype={"split": str, "path": str, "modality": str,
                                         "domain": str, "dataset": str})
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputFileError(f"{what} is not a readable CSV ({exc})",
                             "write a header line pid,camid,split,...") from None
    if len(frame) != n:
        raise InputFileError(f"{what} has {len(frame)} rows but the features have {n}",
                             "give one label row per feature row, in the same order")
    extra = [c for c in frame.columns if c not in LABEL_COLUMNS + OPTIONAL_COLUMNS]
    if extra:
        frame = frame.rename(columns={c: f"x_{c}" for c in extra})
    return labels_from_arrays({c: frame[c].to_numpy() for c in frame.columns
                               if not c.startswith("x_")}, n, what).join(
        frame[[c for c in frame.columns if c.startswith("x_")]])


def check_feature_name(name: str) -> str:
    """The store feature name ``name``, refused (ParameterError on ``feature_name``) when it is
    empty, contains ``/`` (an HDF5 path separator: ``a/b`` would make a group, not a feature)
    or starts with ``.`` (docs/formats.md, ``/features/<name>``)."""
    if not isinstance(name, str) or not name.strip() or "/" in name or name.startswith("."):
        raise ParameterError("store import", "feature_name", name,
                             "is not a valid feature name",
                             "give a non-empty name without '/' that does not start with '.'")
    return name


def apply_camid_base(records: pd.DataFrame, camid_base: int | None,
                     source: str) -> pd.DataFrame:
    """Make camids 0-based (docs/formats.md: ``camid`` is 0-based).

    ``camid_base`` 1 subtracts 1 from every camid; 0 keeps them; None (default) keeps them but
    refuses camids that look 1-based (smallest is 1, none is 0), which would silently shift
    every camera."""
    if camid_base not in (None, 0, 1):
        raise ParameterError("store import", "camid_base", camid_base, "must be 0 or 1",
                             "give the number the input's first camera has")
    cams = records["camid"].to_numpy(np.int64)
    if camid_base == 1:
        if len(cams) and cams.min() < 1:
            raise InputFileError(f"{source}: camid 0 found although the camids are 1-based "
                                 f"({param('camid_base', 1)})",
                                 f"drop {param('camid_base', 1)} if the camids are 0-based")
        records = records.copy()
        records["camid"] = cams - 1
    elif camid_base is None and len(cams) and cams.min() == 1:
        raise InputFileError(f"{source}: camids start at 1 and none is 0 — they look 1-based, "
                             "but camids are 0-based",
                             f"subtract 1 from them, or pass {param('camid_base', 1)} (or "
                             f"{param('camid_base', 0)} to keep them as given)")
    return records


def build_import_records(labels: pd.DataFrame, dataset: str, source: str) -> pd.DataFrame:
    """Fill defaults (path "", modality visible, dataset/domain) and validate the table."""
    labels = labels.copy()
    labels["dataset"] = labels["dataset"] if "dataset" in labels else (dataset or "imported")
    if "domain" not in labels:
        labels["domain"] = labels["dataset"]
    if "path" not in labels:
        labels["path"] = ""
    labels["split"] = labels["split"].map(lambda s: str(s).strip().lower())
    return validate_frame(labels, source=source)


def import_store(out: str | os.PathLike, *, npz: str | os.PathLike | None = None,
                 features: str | os.PathLike | None = None,
                 labels_csv: str | os.PathLike | None = None,
                 label_arrays: Mapping[str, str | os.PathLike] | None = None,
                 feature_name: str = "imported", metric: str = "euclidean",
                 normalized: bool | None = None, dataset: str = "", force: bool = False,
                 camid_base: int | None = None, command: list[str] | None = None) -> Path:
    """Write a store from external embeddings; returns the output path.

    Exactly one source: ``npz``, or ``features`` with ``labels_csv`` or ``label_arrays``
    (``{"pid": path.npy, "camid": ..., "split": ...}``). Features must be 2-D [N, D] and
    finite; float32 input is stored bit-exactly (other float dtypes are cast to float32).
    ``feature_name`` must be a plain name (:func:`check_feature_name`); ``camid_base``
    (None, 0 or 1) is how the input numbers cameras (:func:`apply_camid_base`).
    """
    check_feature_name(feature_name)
    if metric not in METRICS:
        raise ParameterError("store import", "metric", metric,
                             f"is not one of {', '.join(METRICS)}", "use euclidean or cosine")
    inputs: list[Path] = []
    if npz is not None:
        if features is not None or labels_csv is not None or label_arrays:
            raise UsageError(f"{param('npz')} cannot be combined with {param('features')} or "
                             "label files", "give either one .npz or separate arrays")
        npz = Path(npz)
        source = f"{param('npz')} {npz}"
        if not npz.exists():
            raise InputFileError(f"{source} does not exist", "check the path")
        try:
            data = np.load(npz, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("it holds a single array, not named arrays")
            with data:
                arrays = {k: data[k] for k in data.files}
        except _NUMPY_READ_ERRORS as exc:
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise InputFileError(f"{source} is not a readable .npz file ({why})",
                                 "save it with numpy.savez (the file may be truncated)") from None
        if "features" not in arrays:
            raise InputFileError(f"{source} has no array 'features' (has: "
                                 f"{', '.join(arrays) or 'none'})",
                                 "save the embeddings as features=...")
        feats = arrays.pop("features")
        inputs.append(npz)
    elif features is not None:
        features = Path(features)
        feats = _load_array(features, "features")
        inputs.append(features)
        source = param("features")
    else:
        raise UsageError("no input given",
                         f"pass {param('npz', 'FILE')}, or {param('features', 'X.npy')} with "
                         f"{param('labels_csv', 'labels.csv')} or {_label_arrays_hint()}")
    if feats.ndim != 2 or feats.shape[0] == 0 or feats.shape[1] == 0:
        raise InputFileError(f"{source}: features have shape {feats.shape}",
                             "features must be a non-empty 2-D array [N, D]")
    if feats.dtype.kind not in "fiu":
        raise InputFileError(f"{source}: features have dtype {feats.dtype}",
                             "save numeric (float32) features")
    feats32 = feats.astype(np.float32, copy=False)
    if not np.isfinite(feats32).all():
        bad = int((~np.isfinite(feats32)).any(axis=1).sum())
        raise InputFileError(f"{source}: {bad} feature row(s) hold NaN or Inf",
                             "fix or drop those rows before importing")
    n = feats32.shape[0]
    if npz is not None:
        labels = labels_from_arrays(arrays, n, source)
    elif labels_csv is not None:
        labels = read_label_csv(Path(labels_csv), n)
        inputs.append(Path(labels_csv))
    elif label_arrays:
        loaded = {k: _load_array(Path(p), k) for k, p in label_arrays.items()}
        inputs.extend(Path(p) for p in label_arrays.values())
        labels = labels_from_arrays(loaded, n, "label arrays")
    else:
        raise UsageError(f"{param('features')} needs labels",
                         f"add {param('labels_csv', 'labels.csv')} or {_label_arrays_hint()}")
    records = apply_camid_base(build_import_records(labels, dataset, source), camid_base,
                               source)
    if normalized is None:
        norms = np.linalg.norm(feats32, axis=1)
        normalized = bool(np.allclose(norms, 1.0, atol=1e-4))
    prov = make_provenance(command=command, inputs=inputs, imported_from=source)
    with StoreWriter(out, records, dataset=dataset, provenance=prov, force=force,
                     inputs=inputs) as writer:
        writer.set_feature(feature_name, feats32, metric=metric, normalized=normalized)
    return Path(out)
