"""Build a store from embeddings made by any other tool (``reid store import``).

Sources: one ``.npz`` with arrays ``features``, ``pid``, ``camid``, ``split`` and optional
``modality``, ``domain``, ``path``, ``dataset``, ``frame``; one MATLAB ``.mat`` (v5 or v7.3)
with variables of the same names (:mod:`reidcli.store.matfile`); or a features ``.npy`` plus
labels given as ``.npy`` arrays or as a CSV with those columns.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
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
from reidcli.store.import_labels import (  # noqa: F401 (OPTIONAL_COLUMNS: re-exported)
    INT64_MAX, LABEL_COLUMNS, OPTIONAL_COLUMNS, labels_from_arrays, read_label_csv)
from reidcli.store.matfile import read_mat, sniff
from reidcli.store.schema import METRICS
from reidcli.store.writer import StoreWriter

#: what numpy raises on a truncated or corrupt .npy/.npz (a zip member is read lazily)
_NUMPY_READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
                      KeyError, UnicodeDecodeError)


def _wrong_kind(path: Path, parameter: str, expected: str) -> InputFileError | None:
    """A one-line error when ``path`` is plainly another kind of file than ``expected``
    (``npy`` or ``npz``): a MATLAB file, an .npz given for an .npy, a text file."""
    try:
        kind = sniff(path)
    except OSError:
        return None
    what = f"{param(parameter)} {path}"
    if kind == "empty":
        saver = "save" if expected == "npy" else "savez"
        return InputFileError(f"{what} is empty (0 bytes)", f"save it again with numpy.{saver}")
    if kind in ("mat5", "mat73"):
        return InputFileError(f"{what} is a MATLAB .mat file, not a numpy .{expected}",
                              f"import it with {param('mat', path.name)}")
    if kind == "npz" and expected == "npy":
        return InputFileError(f"{what} is an .npz archive of named arrays, not one .npy array",
                              f"pass it as {param('npz', path.name)}")
    if kind == "npy" and expected == "npz":
        return None                         # reported below: a single array
    if kind == "text":
        return InputFileError(f"{what} is a text file, not a numpy .{expected}",
                              f"give labels in a CSV with {param('labels_csv', path.name)}, "
                              "and features saved with numpy")
    if kind in ("hdf5", "other"):
        return InputFileError(f"{what} is not a numpy .{expected} file",
                              f"save it with numpy.{'save' if expected == 'npy' else 'savez'}")
    return None


def _load_array(path: Path, parameter: str) -> np.ndarray:
    if not path.exists():
        raise InputFileError(f"{param(parameter)} {path} does not exist", "check the path")
    if path.is_dir():
        raise InputFileError(f"{param(parameter)} {path} is a folder", "give a .npy file")
    wrong = _wrong_kind(path, parameter, "npy")
    if wrong is not None:
        raise wrong
    try:
        arr = np.load(path, allow_pickle=False)
    except _NUMPY_READ_ERRORS as exc:
        raise _numpy_read_error(exc, f"{param(parameter)} {path}", ".npy",
                                "save it with numpy.save") from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InputFileError(f"{param(parameter)} {path} is an .npz archive, not one array",
                             f"pass it as {param('npz', path.name)}")
    return arr


_OBJECT_HINT = ("save numbers as a numeric array and strings as a fixed-width one "
                "(numpy.asarray(values, dtype=str))")


def _label_arrays_hint() -> str:
    """The label arrays a features ``.npy`` needs (``label_arrays`` keys; flags on the CLI)."""
    return "label arrays " + " ".join(param(k, f"{k}.npy") for k in LABEL_COLUMNS)


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


def apply_pid_base(records: pd.DataFrame, pid_base: int | None, source: str,
                   notes: list[str] | None = None) -> pd.DataFrame:
    """Make pids native (docs/formats.md: pid 0 = distractor, -1 = junk, identities ≥ 1).

    ``pid_base`` 0 adds 1 to every pid ≥ 0 (0-based labels: ``np.arange``, a label encoder),
    so person 0 becomes 1 (-1 stays junk); 1 keeps them; None (default) keeps them and, when
    query or train rows carry pid 0 (evaluation skips such queries as distractors, training
    drops such rows), adds a warning line to ``notes`` (warned at once when ``notes`` is None)."""
    if pid_base not in (None, 0, 1):
        raise ParameterError("store import", "pid_base", pid_base, "must be 0 or 1",
                             "give the number the input's first identity has")
    pids = records["pid"].to_numpy(np.int64)
    if pid_base == 0:
        if len(pids) and pids.max() == INT64_MAX:
            raise InputFileError(f"{source}: pid {INT64_MAX} cannot be shifted by +1",
                                 f"drop {param('pid_base', 0)} or renumber the pids")
        records = records.copy()
        records["pid"] = np.where(pids >= 0, pids + 1, pids)
        return records
    if pid_base is None:
        split = records["split"].to_numpy()
        zero = {s: int(((pids == 0) & (split == s)).sum()) for s in ("query", "train")}
        if zero["query"] or zero["train"]:
            rows = " and ".join(f"{n} {s} row(s)" for s, n in zero.items() if n)
            effects = [what for s, what in (("query", "evaluation skips those queries"),
                                            ("train", "training drops those rows")) if zero[s]]
            note = (f"{source}: {rows} carry pid 0, which means distractor: "
                    + " and ".join(effects)
                    + f" — if the pids are 0-based, import with {param('pid_base', 0)}")
            if notes is None:
                warnings.warn(note, stacklevel=2)
            else:
                notes.append(note)
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
                 mat: str | os.PathLike | None = None,
                 mat_names: Mapping[str, str] | None = None,
                 features: str | os.PathLike | None = None,
                 labels_csv: str | os.PathLike | None = None,
                 label_arrays: Mapping[str, str | os.PathLike] | None = None,
                 feature_name: str = "imported", metric: str = "euclidean",
                 normalized: bool | None = None, dataset: str = "", force: bool = False,
                 camid_base: int | None = None, pid_base: int | None = None,
                 command: list[str] | None = None) -> Path:
    """Write a store from external embeddings; returns the output path.

    Exactly one source: ``npz``; ``mat`` (MATLAB v5 or v7.3, variables named as the .npz
    arrays or as ``mat_names`` maps them: ``{"features": "galFea"}``); or ``features`` with
    ``labels_csv`` or ``label_arrays`` (``{"pid": path.npy, "camid": ..., "split": ...}``).
    Features must be 2-D [N, D] and finite (a .mat matrix stored D×N, one column per image,
    is transposed); float32 input is stored bit-exactly (other float dtypes are cast to
    float32). Label integers must be exact int64 values. ``feature_name`` must be a plain
    name (:func:`check_feature_name`); ``camid_base`` / ``pid_base`` (None, 0 or 1) are how
    the input numbers cameras and identities (:func:`apply_camid_base`,
    :func:`apply_pid_base`); both are recorded in the provenance.
    """
    _check_import_options(feature_name, metric, camid_base, pid_base)
    _check_import_sources(npz, mat, mat_names, features, labels_csv, label_arrays)
    notes: list[str] = []            # warnings, given once the store is written
    src = _read_features(npz, mat, mat_names, features, notes)
    feats32 = _checked_features(src.feats, src.source)
    labels_source, labels = _read_labels(src, labels_csv, label_arrays, feats32.shape[0])
    records = build_import_records(labels, dataset, labels_source)
    records = apply_camid_base(records, camid_base, labels_source)
    records = apply_pid_base(records, pid_base, labels_source, notes)
    if normalized is None:
        normalized = _unit_norm(feats32)
    prov = make_provenance(command=command, inputs=src.inputs, imported_from=src.source,
                           pid_base=pid_base, camid_base=camid_base,
                           **({"pid_shift": 1} if pid_base == 0 else {}), **src.extra_prov)
    with StoreWriter(out, records, dataset=dataset, provenance=prov, force=force,
                     inputs=src.inputs) as writer:
        writer.set_feature(feature_name, feats32, metric=metric, normalized=normalized)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return Path(out)


def _check_import_options(feature_name: str, metric: str, camid_base: int | None,
                          pid_base: int | None) -> None:
    """ParameterError on a bad feature name, metric, or camid/pid base."""
    check_feature_name(feature_name)
    if metric not in METRICS:
        raise ParameterError("store import", "metric", metric,
                             f"is not one of {', '.join(METRICS)}", "use euclidean or cosine")
    for name, value in (("camid_base", camid_base), ("pid_base", pid_base)):
        if value not in (None, 0, 1):
            raise ParameterError("store import", name, value, "must be 0 or 1",
                                 "give the number the input's first one has")


def _check_import_sources(npz, mat, mat_names, features, labels_csv, label_arrays) -> None:
    """UsageError when the inputs do not make exactly one source (one .npz, one .mat, or a
    features .npy with one kind of labels); a missing source is refused by the reader."""
    if mat_names and mat is None:
        raise UsageError(f"{param('mat_var')} names variables of a .mat file",
                         f"add {param('mat', 'FILE.mat')} or drop {param('mat_var')}")
    given = [k for k, v in (("npz", npz), ("mat", mat), ("features", features)) if v is not None]
    if labels_csv is not None and label_arrays:
        raise UsageError(f"{param('labels_csv')} cannot be combined with label arrays "
                         f"({', '.join(param(k) for k in label_arrays)})",
                         "give the labels either as one CSV or as .npy arrays")
    if len(given) > 1 or (given and given[0] != "features" and (labels_csv is not None
                                                                or label_arrays)):
        raise UsageError(f"{' and '.join(param(k) for k in given)} cannot be combined"
                         + (" with label files" if len(given) == 1 else ""),
                         "give either one .npz, one .mat, or a features .npy with labels")


@dataclasses.dataclass
class _Source:
    """The features read from the source: ``feats`` [N, D] as stored, ``source`` (how errors
    name it), the label ``arrays`` of an .npz/.mat (None for a features .npy), the files read
    and provenance extras."""

    feats: np.ndarray
    source: str
    arrays: dict | None
    inputs: list[Path]
    extra_prov: dict = dataclasses.field(default_factory=dict)


def _read_features(npz, mat, mat_names, features, notes: list[str]) -> _Source:
    """The features of the one source given (UsageError when none is)."""
    if npz is not None or mat is not None:
        return _read_archive(npz, mat, mat_names, notes)
    if features is not None:
        features = Path(features)
        feats = _load_array(features, "features")
        return _Source(feats, f"{param('features')} {features}", None, [features])
    raise UsageError("no input given",
                     f"pass {param('npz', 'FILE')}, {param('mat', 'FILE.mat')}, or "
                     f"{param('features', 'X.npy')} with "
                     f"{param('labels_csv', 'labels.csv')} or {_label_arrays_hint()}")


def _read_archive(npz, mat, mat_names, notes: list[str]) -> _Source:
    """Features and label arrays of an .npz (``npz``) or a .mat (``mat``, ``mat_names``)."""
    path = Path(npz if npz is not None else mat)
    source = f"{param('npz' if npz is not None else 'mat')} {path}"
    if not path.exists():
        raise InputFileError(f"{source} does not exist", "check the path")
    if path.is_dir():
        raise InputFileError(f"{source} is a folder", "give a file")
    if npz is not None:
        arrays = _read_npz(path, source)
        _require_npz_features(arrays, source)
        return _Source(np.asarray(arrays.pop("features")), source, arrays, [path])
    arrays = read_mat(path, mat_names, source)
    feats = _mat_features(arrays, mat_names or {}, source)
    feats, transposed = _mat_orientation(feats, arrays, source, notes)
    return _Source(feats, source, arrays, [path],
                   {"features_transposed": True} if transposed else {})


def _require_npz_features(arrays: Mapping[str, np.ndarray], source: str) -> None:
    if "features" not in arrays:
        raise InputFileError(f"{source} has no array 'features'"
                             f" (has: {', '.join(arrays) or 'none'})",
                             "save the embeddings as features=...")


def _mat_features(arrays: dict, mat_names: Mapping[str, str], source: str) -> np.ndarray:
    """The features popped from the variables of a .mat, once every label variable is there."""
    if "features" not in arrays:
        var = mat_names.get("features", "features")
        raise InputFileError(f"{source} has no variable {var!r}",
                             f"name the variable with {param('mat_var', 'features=NAME')}")
    feats = np.asarray(arrays.pop("features"))
    absent = [k for k in LABEL_COLUMNS if k not in arrays]
    if absent:
        names = ", ".join(repr(mat_names.get(k, k)) for k in absent)
        raise InputFileError(f"{source} has no variable(s) {names} (for "
                             f"{', '.join(absent)})",
                             f"name them with {param('mat_var', f'{absent[0]}=NAME')}")
    return feats


def _checked_features(feats: np.ndarray, source: str) -> np.ndarray:
    """``feats`` as float32 [N, D]; InputFileError unless non-empty, 2-D, numeric, finite."""
    if feats.ndim != 2 or feats.shape[0] == 0 or feats.shape[1] == 0:
        raise InputFileError(f"{source}: features have shape {feats.shape}",
                             "features must be a non-empty 2-D array [N, D]")
    if feats.dtype.kind not in "fiu":
        raise InputFileError(f"{source}: features have dtype {feats.dtype}",
                             "save numeric (float32) features")
    with np.errstate(over="ignore", invalid="ignore"):
        feats32 = feats.astype(np.float32, copy=False)
    if not np.isfinite(feats32).all():
        bad_rows = (~np.isfinite(feats32)).any(axis=1)
        overflow = feats.dtype.kind == "f" and bool(np.isfinite(feats[bad_rows]).all())
        raise InputFileError(f"{source}: {int(bad_rows.sum())} feature row(s) hold NaN or Inf"
                             + (" after the cast to float32" if overflow else "")
                             + f" (first: row {int(np.argmax(bad_rows))})",
                             "fix or drop those rows before importing")
    return feats32


def _read_labels(src: _Source, labels_csv, label_arrays,
                 n: int) -> tuple[str, pd.DataFrame]:
    """(how errors name the labels, the label table of ``n`` rows); label files read are
    added to ``src.inputs``."""
    if src.arrays is not None:
        return src.source, labels_from_arrays(src.arrays, n, src.source)
    if labels_csv is not None:
        labels = read_label_csv(Path(labels_csv), n)
        src.inputs.append(Path(labels_csv))
        return f"{param('labels_csv')} {labels_csv}", labels
    if label_arrays:
        loaded = {k: _load_array(Path(p), k) for k, p in label_arrays.items()}
        src.inputs.extend(Path(p) for p in label_arrays.values())
        return "label arrays", labels_from_arrays(loaded, n, "label arrays")
    raise UsageError(f"{param('features')} needs labels",
                     f"add {param('labels_csv', 'labels.csv')} or {_label_arrays_hint()}")


def _unit_norm(feats: np.ndarray) -> bool:
    """Whether every row of ``feats`` [N, D] has L2 norm 1 (within 1e-4)."""
    norms = np.linalg.norm(feats, axis=1)
    return bool(np.allclose(norms, 1.0, atol=1e-4))


def _read_npz(path: Path, source: str) -> dict[str, np.ndarray]:
    """The named arrays of an ``.npz`` (InputFileError naming ``source`` otherwise)."""
    wrong = _wrong_kind(path, "npz", "npz")
    if wrong is not None:
        raise wrong
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single array, not named arrays")
        with data:
            return {k: data[k] for k in data.files}
    except _NUMPY_READ_ERRORS as exc:
        raise _numpy_read_error(exc, source, ".npz",
                                "save it with numpy.savez (the file may be truncated)") from None


def _numpy_read_error(exc: BaseException, source: str, kind: str, todo: str) -> InputFileError:
    """The one-line error for a numpy file ``source`` that ``np.load`` could not read: an
    object array (never unpickled) or an unreadable ``kind`` file, with numpy's reason."""
    why = " ".join(str(exc).split())[:160] or type(exc).__name__
    if "pickle" in why:
        return InputFileError(f"{source} holds Python objects (an object array), which are "
                              "never unpickled", _OBJECT_HINT)
    return InputFileError(f"{source} is not a readable {kind} file ({why})", todo)


def _mat_orientation(feats: np.ndarray, arrays: Mapping[str, np.ndarray], source: str,
                     notes: list[str]) -> tuple[np.ndarray, bool]:
    """Features of a .mat as [N, D]: a matrix whose columns, not rows, match the N labels
    (MATLAB code often keeps one image per column) is transposed, with a note in ``notes``."""
    pid = arrays.get("pid")
    if feats.ndim != 2 or pid is None:
        return feats, False
    n = int(np.asarray(pid).size)
    if feats.shape[0] != n and feats.shape[1] == n:
        notes.append(f"{source}: features are {feats.shape[0]}×{feats.shape[1]}, one column "
                     f"per label; read as {n} rows of dimension {feats.shape[0]}")
        return np.ascontiguousarray(feats.T), True
    return feats, False
