"""MATLAB ``.mat`` files for ``reid store import --mat`` (docs/formats.md, "Importing").

Version 5 files (MATLAB's default up to ``-v7``) are read with :func:`scipy.io.loadmat`;
version 7.3 files are HDF5 files behind a 512-byte MATLAB header and are read with h5py.
MATLAB stores arrays column-major, so a v7.3 dataset of an ``N×D`` variable has HDF5 shape
``(D, N)``: every v7.3 array is transposed back here. Variables become numpy arrays:

* numeric and logical matrices → 2-D arrays ``[rows, cols]`` as MATLAB shows them;
* char matrices (one string per row) and cell arrays of strings → 1-D arrays of ``str``.

Struct, MATLAB ``string`` objects, complex and sparse variables are refused.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from reidcli.errors import InputFileError, ParameterError
from reidcli.naming import param

MAT5_MAGIC = b"MATLAB 5.0 MAT-file"
MAT73_MAGIC = b"MATLAB 7.3 MAT-file"
#: variables a ``.mat`` import reads, named as the arrays of an ``.npz`` import
MAT_KEYS = ("features", "pid", "camid", "split", "modality", "domain", "path", "dataset",
            "frame")
_NUMERIC_CLASSES = {"double", "single", "logical", "int8", "uint8", "int16", "uint16",
                    "int32", "uint32", "int64", "uint64"}


def sniff(path: str | os.PathLike) -> str:
    """What a file's first bytes say it is: ``empty``, ``npz`` (zip), ``npy``, ``mat5``,
    ``mat73``, ``hdf5``, ``text`` or ``other``."""
    with open(path, "rb") as f:
        head = f.read(128)
    if not head:
        return "empty"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "npz"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(MAT73_MAGIC):
        return "mat73"
    if head.startswith(b"MATLAB"):
        return "mat5"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "hdf5"
    try:
        head.decode("utf-8")
        return "text"
    except UnicodeDecodeError as exc:           # a character cut at byte 128 is still text
        return "text" if len(head) == 128 and exc.start >= 125 else "other"


def parse_mat_names(items: Sequence[str] | None) -> dict[str, str]:
    """``["features=feat_q", ...]`` → ``{"features": "feat_q"}``; ParameterError on
    ``mat_var`` for a malformed item or an unknown key (keys: :data:`MAT_KEYS`)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, name = str(item).partition("=")
        key, name = key.strip(), name.strip()
        if not sep or not key or not name:
            raise ParameterError("store import", "mat_var", item, "is not of the form KEY=VAR",
                                 f"e.g. {param('mat_var', 'features=galFea')}")
        if key not in MAT_KEYS:
            raise ParameterError("store import", "mat_var", item, f"names no array {key!r}",
                                 f"keys are {', '.join(MAT_KEYS)}")
        out[key] = name
    return out


def read_mat(path: str | os.PathLike, names: Mapping[str, str] | None = None,
             source: str | None = None) -> dict[str, np.ndarray]:
    """The variables of :data:`MAT_KEYS` present in ``path`` (``names`` maps a key to the
    variable that holds it; by default the key itself), keyed by key. Numeric variables are
    2-D ``[rows, cols]``, string variables 1-D. InputFileError naming ``source`` (default
    the path) for an unreadable file or an unsupported variable."""
    path = Path(path)
    source = source or str(path)
    names = {k: (names or {}).get(k, k) for k in MAT_KEYS}
    kind = sniff(path)
    if kind == "empty":
        raise InputFileError(f"{source} is empty (0 bytes)", "save it again in MATLAB")
    if kind == "mat73" or kind == "hdf5":
        return _read_v73(path, names, source)
    if kind != "mat5":
        raise InputFileError(f"{source} is not a MATLAB .mat file (no MATLAB header)",
                             "save it in MATLAB with save(..., '-v7') or '-v7.3'")
    return _read_v5(path, names, source)


# -- version 5 ------------------------------------------------------------------------------
def _read_v5(path: Path, names: Mapping[str, str], source: str) -> dict[str, np.ndarray]:
    from scipy.io import loadmat

    try:
        raw = loadmat(path, variable_names=sorted(set(names.values())), squeeze_me=False,
                      chars_as_strings=True, mat_dtype=False)
    except Exception as exc:                 # scipy raises many types on damaged files
        why = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise InputFileError(f"{source} is not a readable .mat file ({why})",
                             "save it again in MATLAB (the file may be truncated)") from None
    out = {}
    for key, var in names.items():
        if var in raw:
            out[key] = _v5_value(raw[var], var, source)
    return out


def _v5_value(value, var: str, source: str) -> np.ndarray:
    value = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if value.dtype.names is not None:
        raise _unsupported(source, var, "a struct")
    kind = value.dtype.kind
    if kind == "U":                                    # char matrix: one string per row
        return np.array([s.rstrip() for s in value.ravel().tolist()], dtype=object)
    if kind == "O":                                    # cell array (or an opaque object)
        if type(value).__name__ == "MatlabOpaque":
            raise _unsupported(source, var, "a MATLAB string/object array")
        return np.array([_v5_cell_text(c, var, source) for c in value.ravel(order="F")],
                        dtype=object)
    if kind == "c":
        raise _unsupported(source, var, "complex")
    if kind not in "biuf":
        raise _unsupported(source, var, f"of type {value.dtype}")
    return value


def _v5_cell_text(cell, var: str, source: str) -> str:
    cell = np.asarray(cell)
    if cell.dtype.kind == "U":
        return "".join(cell.ravel().tolist()).rstrip()
    if cell.size == 0:
        return ""
    if cell.dtype.kind in "iuf" and cell.size == 1:
        return str(cell.ravel()[0].item())
    raise _unsupported(source, var, "a cell array that does not hold strings")


# -- version 7.3 (HDF5) -----------------------------------------------------------------------
def _read_v73(path: Path, names: Mapping[str, str], source: str) -> dict[str, np.ndarray]:
    import h5py

    try:
        h5 = h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        why = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise InputFileError(f"{source} is not a readable v7.3 .mat file ({why})",
                             "save it again in MATLAB (the file may be truncated)") from None
    out = {}
    with h5:
        try:
            for key, var in names.items():
                if var in h5:
                    out[key] = _v73_value(h5, h5[var], var, source)
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as exc:
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise InputFileError(f"{source} is not a readable v7.3 .mat file ({why})",
                                 "save it again in MATLAB (the file may be truncated)") from None
    return out


def _matlab_class(obj) -> str:
    cls = obj.attrs.get("MATLAB_class", b"")
    return cls.decode() if isinstance(cls, bytes) else str(cls)


def _v73_value(h5, obj, var: str, source: str) -> np.ndarray:
    import h5py

    if not isinstance(obj, h5py.Dataset):
        raise _unsupported(source, var, "a struct or object")
    cls = _matlab_class(obj)
    if obj.attrs.get("MATLAB_empty", 0):
        return np.zeros((0, 0)) if cls != "char" else np.array([], dtype=object)
    if obj.attrs.get("MATLAB_sparse") is not None:
        raise _unsupported(source, var, "sparse")
    data = obj[()]
    if cls == "char":
        return np.array(_chars_to_text(data), dtype=object)
    if cls == "cell":
        refs = np.asarray(data).T.ravel(order="F")      # MATLAB's linear (column-major) order
        return np.array([_v73_cell_text(h5, h5[r], var, source) for r in refs], dtype=object)
    if cls not in _NUMERIC_CLASSES and cls:
        raise _unsupported(source, var, f"of MATLAB class {cls}")
    arr = np.asarray(data)
    if arr.dtype.names is not None:
        raise _unsupported(source, var, "complex")
    if arr.dtype.kind not in "biuf":
        raise _unsupported(source, var, f"of type {arr.dtype}")
    if cls == "logical":
        arr = arr.astype(bool)
    return arr.T if arr.ndim >= 2 else arr.reshape(1, -1) if arr.ndim == 1 else arr.reshape(1, 1)


def _chars_to_text(data) -> list[str]:
    """A v7.3 char dataset (uint16 codes, HDF5 shape ``(L, N)``) → N strings."""
    codes = np.asarray(data)
    if codes.ndim == 1:
        codes = codes.reshape(-1, 1)
    rows = codes.T                                     # MATLAB's N×L
    return ["".join(chr(int(c)) for c in row).rstrip() for row in rows]


def _v73_cell_text(h5, obj, var: str, source: str) -> str:
    cls = _matlab_class(obj)
    if obj.attrs.get("MATLAB_empty", 0):
        return ""
    if cls == "char":
        return "".join(_chars_to_text(obj[()]))
    if cls in _NUMERIC_CLASSES:
        arr = np.asarray(obj[()])
        if arr.size == 1:
            return str(arr.ravel()[0].item())
    raise _unsupported(source, var, "a cell array that does not hold strings")


def _unsupported(source: str, var: str, what: str) -> InputFileError:
    return InputFileError(f"{source}: variable {var!r} is {what}",
                          "save numbers as numeric matrices and strings as a char matrix or "
                          "a cell array of char (cellstr)")


__all__ = ["MAT_KEYS", "parse_mat_names", "read_mat", "sniff"]
