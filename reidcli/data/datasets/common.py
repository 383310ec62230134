"""Small helpers shared by the dataset loaders: folder checks and name-pattern scans."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from reidcli.data.datasets.market_folder import list_images
from reidcli.data.records import empty_frame, normalize_frame
from reidcli.errors import DatasetError


def require_dir(path: Path, dataset: str) -> Path:
    """``path`` if it is a folder, else a DatasetError naming it."""
    if not Path(path).is_dir():
        raise DatasetError(f"{dataset}: missing folder {path}",
                           f"see `reid data info {dataset}` for the expected tree")
    return Path(path)


def require_file(path: Path, dataset: str) -> Path:
    """``path`` if it is a file, else a DatasetError naming it."""
    if not Path(path).is_file():
        raise DatasetError(f"{dataset}: missing file {path}",
                           f"see `reid data info {dataset}` for the expected tree")
    return Path(path)


def scan_folder(folder: Path, pattern: re.Pattern, dataset: str,
                make_row: Callable[[re.Match, Path], dict], *, strict: bool = True,
                suffixes: Iterable[str] | None = None) -> list[dict]:
    """Rows for every image of ``folder`` (sorted by name) whose name matches ``pattern``.

    ``strict``: a non-matching image name is an error naming the file; otherwise it is
    skipped (e.g. PRID450S's mask files). ``make_row(match, path)`` builds the record fields.
    """
    folder = require_dir(folder, dataset)
    rows = []
    for name in list_images(folder):
        if suffixes is not None and not name.lower().endswith(tuple(suffixes)):
            continue
        match = pattern.match(name)
        if match is None:
            if strict:
                raise DatasetError(f"{dataset}: malformed image name {folder / name}",
                                   f"expected names matching {pattern.pattern}")
            continue
        rows.append(make_row(match, folder / name))
    return rows


def rows_to_frame(rows: list[dict], dataset: str) -> pd.DataFrame:
    """Record table of loader rows (``path`` absolute, ``split`` defaulting to train)."""
    if not rows:
        return empty_frame()
    frame = pd.DataFrame(rows)
    frame["dataset"] = dataset
    if "split" not in frame:
        frame["split"] = "train"
    frame["path"] = frame["path"].map(str)
    return normalize_frame(frame.sort_values("path", kind="stable").reset_index(drop=True))
