"""Small helpers shared by the dataset loaders: folder checks and name-pattern scans."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from reidcli.data.datasets.market_folder import list_images
from reidcli.data.records import empty_frame, normalize_frame
from reidcli.errors import DatasetError

#: largest pid, camera or frame number a file name or list may carry: far above every real
#: dataset, far below int64, so a damaged name (``1e20``, ``2**63+5``) is refused by name
#: rather than overflowing the record table (docs/errors.md)
MAX_NUMBER = 2**31 - 1


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


def read_text(path: Path, dataset: str, what: str = "file") -> str:
    """The text of ``path`` (UTF-8, a BOM tolerated); a one-line DatasetError naming the file
    when it is missing, unreadable, a folder or not text (e.g. binary junk or another
    encoding)."""
    path = require_file(path, dataset)
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{dataset}: {what} {path} is not UTF-8 text (byte "
                           f"{exc.start}: {exc.reason})",
                           "restore the file from the dataset release") from None
    except OSError as exc:
        raise DatasetError(f"{dataset}: cannot read {what} {path} ({exc.strerror or exc})",
                           "check the file's permissions or restore it") from None


def parse_number(text: str, dataset: str, where: str, what: str = "number",
                 low: int = 0, high: int = MAX_NUMBER) -> int:
    """``text`` (decimal digits, an optional leading ``-``) as an int in [low, high]; a
    one-line DatasetError naming ``where`` (the file, or the file and line) otherwise."""
    body = text[1:] if text.startswith("-") else text
    value = int(text) if body.isdigit() and body.isascii() and len(body) <= 18 else None
    if value is None or not low <= value <= high:
        raise DatasetError(f"{dataset}: {what} {text!r} in {where} is not an integer in "
                           f"[{low}, {high}]", "this entry does not belong to the dataset; "
                           "remove or restore it")
    return value


def check_numbers(rows: list[dict], dataset: str) -> None:
    """Refuse a row with an integer (pid, camera, frame, an ``x_`` number) outside
    [−1, :data:`MAX_NUMBER`] (a damaged file name such as ``…_9223372036854775813.bmp``): a
    one-line DatasetError naming the image."""
    for row in rows:
        for column, value in row.items():
            if not isinstance(value, int) or isinstance(value, bool):
                continue                  # numpy ints come from arrays, already in range
            if not -1 <= value <= MAX_NUMBER:
                raise DatasetError(f"{dataset}: {row.get('path')} gives {column} {value}, "
                                   f"outside [-1, {MAX_NUMBER}]",
                                   "this file does not belong to the dataset; remove it")


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
    check_numbers(rows, dataset)
    frame = pd.DataFrame(rows)
    frame["dataset"] = dataset
    if "split" not in frame:
        frame["split"] = "train"
    frame["path"] = frame["path"].map(str)
    return normalize_frame(frame.sort_values("path", kind="stable").reset_index(drop=True))
