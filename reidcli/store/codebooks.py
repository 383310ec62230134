"""Reading the fitted descriptors of a store: ``/codebooks/<name>`` (docs/formats.md,
"Feature store (schema 1)"; docs/methods/bow.md). The descriptor itself
(:mod:`reidcli.features.bow`) turns the arrays back into a codebook."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from reidcli.errors import InputFileError
from reidcli.store.schema import CODEBOOKS


def codebook_names(path: str | os.PathLike) -> list[str]:
    """Names of the fitted descriptors stored under ``/codebooks`` of ``path`` (sorted)."""
    import h5py

    with h5py.File(path, "r") as h5:
        return sorted(h5[CODEBOOKS]) if CODEBOOKS in h5 else []


def read_codebook(path: str | os.PathLike, name: str
                  ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, attrs) of ``/codebooks/<name>`` of a store (or any HDF5 file); an
    InputFileError when the file is missing, unreadable or holds no such group."""
    import h5py

    path = Path(path)
    hint = f"give a feature store extracted with the {name} descriptor"
    if not path.is_file():
        raise InputFileError(f"codebook file {path} does not exist", hint)
    try:
        with h5py.File(path, "r") as h5:
            if f"{CODEBOOKS}/{name}" not in h5:
                raise InputFileError(f"{path} holds no /{CODEBOOKS}/{name}", hint)
            group = h5[f"{CODEBOOKS}/{name}"]
            return {k: group[k][()] for k in group}, dict(group.attrs)
    except OSError as exc:
        raise InputFileError(f"cannot read {path} ({exc.__class__.__name__})",
                             "give an HDF5 feature store") from None


__all__ = ["codebook_names", "read_codebook"]
