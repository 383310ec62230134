"""Write MATLAB ``-v7.3`` .mat files the way MATLAB lays them out (for the import tests).

A v7.3 file is HDF5 with a 512-byte user block whose first 128 bytes are MATLAB's header
(116 bytes of text starting ``MATLAB 7.3 MAT-file``, 8 bytes subsystem offset, version
0x0200, endian indicator ``IM``). Every variable is a dataset with a ``MATLAB_class``
attribute; MATLAB is column-major, so an ``N×D`` variable is stored with HDF5 shape
``(D, N)``. Char arrays are uint16 codes (``MATLAB_int_decode`` 2); a cell array is a dataset
of object references into the ``#refs#`` group.
"""
from __future__ import annotations

import h5py
import numpy as np

_CLASSES = {np.dtype(np.float64): "double", np.dtype(np.float32): "single",
            np.dtype(np.int64): "int64", np.dtype(np.int32): "int32",
            np.dtype(np.uint8): "uint8", np.dtype(np.uint64): "uint64",
            np.dtype(np.bool_): "logical"}


class Char(list):
    """A MATLAB char matrix: one string per row, padded with spaces to one width."""


class Cell(list):
    """A MATLAB N×1 cell array of char row vectors (``cellstr``)."""


def _char_dataset(parent, name: str, rows: list[str]):
    width = max((len(r) for r in rows), default=0)
    codes = np.array([[ord(c) for c in r.ljust(width)] for r in rows], dtype=np.uint16)
    ds = parent.create_dataset(name, data=codes.T)          # MATLAB N×L → HDF5 (L, N)
    ds.attrs["MATLAB_class"] = np.bytes_("char")
    ds.attrs["MATLAB_int_decode"] = np.int32(2)
    return ds


def write_mat73(path, variables: dict) -> None:
    """``variables``: name → numeric ndarray (a 1-D array is a MATLAB 1×N row vector),
    :class:`Char` or :class:`Cell`."""
    with h5py.File(path, "w", userblock_size=512) as h5:
        refs = h5.create_group("#refs#")
        for name, value in variables.items():
            if isinstance(value, Char):
                _char_dataset(h5, name, list(value))
            elif isinstance(value, Cell):
                targets = [_char_dataset(refs, f"{name}_{i}", [text]).ref
                           for i, text in enumerate(value)]
                data = np.array(targets, dtype=h5py.ref_dtype).reshape(1, -1)   # N×1 → (1, N)
                ds = h5.create_dataset(name, data=data, dtype=h5py.ref_dtype)
                ds.attrs["MATLAB_class"] = np.bytes_("cell")
            else:
                arr = np.asarray(value)
                if arr.ndim == 1:
                    arr = arr.reshape(1, -1)
                stored = arr.astype(np.uint8) if arr.dtype == np.bool_ else arr
                ds = h5.create_dataset(name, data=np.ascontiguousarray(stored.T))
                ds.attrs["MATLAB_class"] = np.bytes_(_CLASSES[arr.dtype])
    text = (b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Thu Nov 26 12:00:00 2026 "
            b"HDF5 schema 1.00 .").ljust(116, b" ")
    with open(path, "r+b") as f:
        f.write(text + b"\0" * 8 + b"\x00\x02" + b"IM")
