"""Store rows from any folder of images or a CSV list of them (``reid extract --images``;
docs/cli.md, "Any image folder").

The rows become a one-trial :class:`~reidcli.features.layout.StoreLayout` of dataset
``images``, extracted by the same code as a registered dataset's. Which rows are queries:

* ``images`` = DIR holding Market-style split folders (``query/``, ``bounding_box_test/`` or
  ``gallery/``, optionally ``bounding_box_train/``): each of those folders is its split
  (read recursively); nothing else under DIR is read;
* otherwise every image under DIR (recursively) is a ``gallery`` row and every image under
  ``query_images`` a ``query`` row;
* ``images_list`` = a CSV with a ``path`` column and optional ``pid``, ``camid`` (0-based)
  and ``split`` (query | gallery | train; default gallery) columns; relative paths are read
  from the list's folder.

Labels: ``pattern`` is a regular expression searched in each file name, with a named group
``pid`` and optionally ``cam`` (1-based camera number, as in Market names: c1 → camid 0),
``camid`` (0-based) and ``frame``; ``"market"`` is the shorthand
:data:`PATTERNS` ``["market"]``. Pids keep Market's conventions (-1 junk, 0 distractor). A
file the pattern does not match is an error naming it unless ``skip_unmatched``. Without a
pattern (or a list ``pid``), rows are unlabelled: pid -1. A row whose camera nothing gives
gets the 0-based index of its sub-folder (relative to the folder it was found under) among
the sorted distinct sub-folders of all rows — images directly in the folder come first, so
one flat folder is camera 0.

Every row records where it came from: its absolute ``path``, ``x_source`` (the folder or list
file given) and ``x_folder`` (its sub-folder there, ``""`` at the top).
"""
from __future__ import annotations

import csv
import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from reidcli.data.datasets.market_folder import IMAGE_SUFFIXES
from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.features.layout import StoreLayout, layout_from_splits
from reidcli.naming import param

#: the store's ``dataset`` for rows read from folders or lists
DATASET = "images"
OWNER = "image folder"
#: pattern shorthands; ``market``: Market-1501 / DukeMTMC-reID names (``0001_c1s1_…``)
PATTERNS: dict[str, str] = {"market": r"^(?P<pid>-?\d+)_c(?P<cam>\d)"}
#: sub-folders of ``images`` that are a split by themselves (Market layout)
SPLIT_FOLDERS: dict[str, str] = {"query": "query", "bounding_box_test": "gallery",
                                 "gallery": "gallery", "bounding_box_train": "train"}
LIST_COLUMNS = ("path", "pid", "camid", "split")
LIST_SPLITS = ("query", "gallery", "train")


@dataclasses.dataclass(frozen=True)
class NamePattern:
    """A file-name regex with a ``pid`` group (and ``cam`` 1-based | ``camid``, ``frame``)."""

    text: str
    regex: re.Pattern

    def parse(self, name: str) -> dict[str, int] | None:
        """``{"pid", ["camid"], ["frame"]}`` of a file name; None when it does not match."""
        m = self.regex.search(name)
        if m is None:
            return None
        out = {}
        for group, value in m.groupdict().items():
            if group not in ("pid", "cam", "camid", "frame") or value is None:
                continue
            try:
                number = int(value)
            except ValueError:
                raise InputFileError(f"image name {name}: group {group!r} of "
                                     f"{param('pattern', repr(self.text))} matched "
                                     f"{value!r}, not an integer",
                                     "make the group match digits only, e.g. (?P<pid>-?\\d+)"
                                     ) from None
            out["camid" if group == "cam" else group] = number - (group == "cam")
        return out


def compile_pattern(text: str | None) -> NamePattern | None:
    """``pattern`` text (or a :data:`PATTERNS` shorthand) → :class:`NamePattern`;
    ParameterError when it is not a regex or lacks the ``pid`` group."""
    if text is None:
        return None
    source = PATTERNS.get(text.strip().lower(), text)
    try:
        regex = re.compile(source)
    except re.error as exc:
        raise ParameterError(OWNER, "pattern", text, f"is not a regular expression "
                             f"({exc})", "e.g. market, or '(?P<pid>\\d+)_c(?P<cam>\\d)'"
                             ) from None
    if "pid" not in regex.groupindex:
        raise ParameterError(OWNER, "pattern", text, "has no named group 'pid'",
                             "name the identity (?P<pid>…) and the camera (?P<cam>…) "
                             "(1-based) or (?P<camid>…)")
    if "cam" in regex.groupindex and "camid" in regex.groupindex:
        raise ParameterError(OWNER, "pattern", text, "has both groups 'cam' and "
                             "'camid'", "keep one: cam is 1-based (c1 → 0), camid 0-based")
    return NamePattern(text=text, regex=regex)


def images_under(folder: Path) -> list[Path]:
    """Image files (:data:`IMAGE_SUFFIXES`, any case) under ``folder``, recursively, sorted
    by their relative path's bytes; hidden files and folders are skipped."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(top, f) for f in files
                  if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES)]
    return sorted(found, key=lambda p: str(p.relative_to(folder)).encode())


def _rows_of_folder(folder: Path, split: str, source: Path) -> list[dict[str, Any]]:
    rows = []
    for path in images_under(folder):
        sub = path.parent.relative_to(folder).as_posix()
        rows.append({"path": str(path.absolute()), "split": split,
                     "x_source": str(source), "x_folder": "" if sub == "." else sub})
    return rows


def _check_dir(path: Path, name: str) -> Path:
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a folder"
        raise InputFileError(f"{param(name, path)} {what}", "give a folder of images")
    return path.absolute()


def folder_rows(images: str | os.PathLike | None,
                query_images: str | os.PathLike | None = None) -> tuple[list[dict], list[str]]:
    """Rows (path, split, x_source, x_folder) of ``images`` and ``query_images`` (module doc)
    and the split folders recognised under ``images``."""
    rows: list[dict[str, Any]] = []
    recognised: list[str] = []
    if images is not None:
        root = _check_dir(Path(images), "images")
        recognised = [name for name in SPLIT_FOLDERS if (root / name).is_dir()]
        if {"query", "gallery"} <= {SPLIT_FOLDERS[n] for n in recognised}:
            if query_images is not None:
                raise UsageError(f"{param('images', images)} already holds a query/ folder",
                                 f"drop {param('query_images')}, or give a folder without "
                                 "split folders")
            for name in recognised:
                rows += _rows_of_folder(root / name, SPLIT_FOLDERS[name], root / name)
        else:
            recognised = []
            rows += _rows_of_folder(root, "gallery", root)
    if query_images is not None:
        qroot = _check_dir(Path(query_images), "query_images")
        queries = _rows_of_folder(qroot, "query", qroot)
        gallery = {os.path.realpath(r["path"]) for r in rows}
        both = [q["path"] for q in queries if os.path.realpath(q["path"]) in gallery]
        if both:
            raise UsageError(f"{len(both)} image(s) are both under {param('images')} and "
                             f"{param('query_images')} (first: {both[0]})",
                             "give a query folder outside the gallery folder")
        rows += queries
    return rows, recognised


def list_rows(images_list: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a CSV list (module doc); InputFileError naming the line of a bad value, an
    unknown column, a missing file or a path listed twice."""
    listed = Path(images_list)
    if not listed.is_file():
        raise InputFileError(f"{param('images_list', listed)} does not exist",
                             "give a CSV file with a 'path' column")
    source = listed.absolute()
    raw = _read_list(listed)
    rows, seen = [], {}
    for row, line in raw:
        rows.append(_list_row(row, line, listed, source, seen))
    return rows


def _read_list(listed: Path) -> list[tuple[dict[str, str], int]]:
    """(row with stripped keys and values, line number) of each line of the CSV ``listed``
    once its header is checked."""
    try:
        with open(listed, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            _check_list_columns(listed, [c.strip() for c in (reader.fieldnames or [])])
            return [({(k or "").strip(): (v or "").strip() for k, v in row.items()
                      if k is not None}, reader.line_num) for row in reader]
    except UnicodeDecodeError:
        raise InputFileError(f"{listed} is not a UTF-8 text file",
                             "give a CSV list of image paths") from None
    except csv.Error as exc:
        raise InputFileError(f"{listed} is not a readable CSV ({exc})",
                             "give a CSV list of image paths") from None


def _check_list_columns(listed: Path, columns: list[str]) -> None:
    if "path" not in columns:
        raise InputFileError(f"{listed} has no 'path' column (header: "
                             f"{', '.join(columns) or 'none'})",
                             "the first line names the columns: path[,pid,camid,"
                             "split]")
    unknown = [c for c in columns if c not in LIST_COLUMNS]
    if unknown:
        raise InputFileError(f"{listed}: unknown column(s) {', '.join(unknown)}",
                             f"columns are {', '.join(LIST_COLUMNS)}")


def _list_row(row: dict[str, str], line: int, listed: Path, source: Path,
              seen: dict[str, int]) -> dict[str, Any]:
    """The record of line ``line`` of the list: its image (relative to the list's folder,
    existing, not listed before: ``seen`` maps each path to its line), split, pid, camid."""
    where = f"{listed} line {line}"
    if not row.get("path"):
        raise InputFileError(f"{where} has no path", "give an image path on every line")
    path = Path(row["path"]).expanduser()
    path = (path if path.is_absolute() else source.parent / path).absolute()
    if not path.is_file():
        raise InputFileError(f"{where}: image {path} does not exist",
                             "fix the path (relative paths start at the list's folder)")
    key = os.path.normpath(str(path))
    if key in seen:
        raise InputFileError(f"{where}: image {path} is listed twice (also line "
                             f"{seen[key]})", "list each image once")
    seen[key] = line
    out: dict[str, Any] = {"path": str(path), "split": row.get("split") or "gallery",
                           "x_source": str(source), "x_line": line}
    if out["split"] not in LIST_SPLITS:
        raise InputFileError(f"{where}: split {out['split']!r}",
                             f"split is one of {', '.join(LIST_SPLITS)}")
    for col in ("pid", "camid"):
        if row.get(col):
            out[col] = _list_int(row[col], col, where)
    return out


def _list_int(value: str, col: str, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InputFileError(f"{where}: {col} {value!r} is not an integer",
                             f"give an integer {col}, or leave it empty "
                             "(unlabelled)") from None


def _label(rows: list[dict[str, Any]], pattern: NamePattern | None,
           skip_unmatched: bool) -> list[dict[str, Any]]:
    """Set pid/camid/frame from ``pattern`` (rows without a pid); drop or refuse the files
    it does not match; -1 for the pid nothing gives."""
    kept = []
    for row in rows:
        if pattern is not None and "pid" not in row:
            name = os.path.basename(row["path"])
            parsed = pattern.parse(name)
            if parsed is None:
                if skip_unmatched:
                    continue
                raise InputFileError(f"image {row['path']} does not match "
                                     f"{param('pattern', repr(pattern.text))}",
                                     f"fix the pattern, rename the file, or pass "
                                     f"{param('skip_unmatched', True)}")
            row = {**row, **{k: v for k, v in parsed.items()
                             if not (k == "camid" and "camid" in row)}}
        row.setdefault("pid", -1)
        if row["pid"] < -1:
            raise InputFileError(f"image {row['path']}: pid {row['pid']} is below -1",
                                 "pids are ≥ 0; -1 = junk or unlabelled")
        if row.get("camid", 0) < 0:
            raise InputFileError(f"image {row['path']}: camid {row['camid']} is negative",
                                 "camid is 0-based (the pattern's cam group is 1-based)")
        kept.append(row)
    return kept


def _folder_cameras(rows: list[dict[str, Any]]) -> None:
    """camid of the rows that have none: their sub-folder's index (module doc)."""
    folders = sorted({r.get("x_folder", "") for r in rows if "camid" not in r},
                     key=lambda s: s.encode())
    index = {f: i for i, f in enumerate(folders)}
    for row in rows:
        if "camid" not in row:
            row["camid"] = index[row.get("x_folder", "")]


def image_records(images: str | os.PathLike | None = None,
                  query_images: str | os.PathLike | None = None,
                  images_list: str | os.PathLike | None = None, *,
                  pattern: str | None = None, skip_unmatched: bool = False
                  ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The record table [N rows] of ``images`` (+ ``query_images``) or of ``images_list``,
    and what the store's protocol options record about where the rows came from."""
    if images_list is not None and (images is not None or query_images is not None):
        raise UsageError(f"{param('images_list')} and {param('images')}/"
                         f"{param('query_images')} both name images", "give one of them")
    if images is None and query_images is None and images_list is None:
        raise UsageError("no images given", f"pass {param('images')} DIR or "
                         f"{param('images_list')} FILE")
    compiled = compile_pattern(pattern)
    rows, recognised = _given_rows(images, query_images, images_list, compiled)
    total = len(rows)
    rows = _label(rows, compiled, skip_unmatched)
    if not rows:
        raise InputFileError(f"none of the {total} images matches "
                             f"{param('pattern', repr(pattern))}", "fix the pattern")
    _folder_cameras(rows)
    frame = normalize_frame(pd.DataFrame([{**r, "dataset": DATASET} for r in rows]))
    where: dict[str, Any] = {"skipped_unmatched": total - len(rows)}
    for key, value in (("images", images), ("query_images", query_images),
                       ("images_list", images_list)):
        if value is not None:
            where[key] = str(Path(value).absolute())
    if recognised:
        where["split_folders"] = recognised
    if pattern is not None:
        where["pattern"] = compiled.regex.pattern
    where["labelled"] = bool((frame["pid"] != -1).any())
    return frame, where


def _given_rows(images, query_images, images_list, compiled: NamePattern | None
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows of the list or of the folders, split folders recognised); InputFileError when
    there are none, UsageError when ``compiled`` and a pid column both label them."""
    if images_list is not None:
        rows = list_rows(images_list)
        if compiled is not None and any("pid" in r for r in rows):
            raise UsageError(f"{param('pattern')} and the pid column of {images_list} both "
                             "label the images", "give one of them")
        recognised: list[str] = []
    else:
        rows, recognised = folder_rows(images, query_images)
    if not rows:
        where = images_list if images_list is not None else \
            " and ".join(str(p) for p in (images, query_images) if p is not None)
        raise InputFileError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {where}",
                             "check the folder")
    return rows, recognised


@dataclasses.dataclass
class ImageLayout(StoreLayout):
    """A :class:`StoreLayout` whose input, hashed into the store's provenance, is the one
    folder or list given — never the folder above two given folders (it may be ``/``)."""

    given: tuple[str, ...] = ()

    def image_folder(self) -> str | None:
        return self.given[0] if len(self.given) == 1 else None


def image_layout(images: str | os.PathLike | None = None,
                 query_images: str | os.PathLike | None = None,
                 images_list: str | os.PathLike | None = None, *,
                 pattern: str | None = None, skip_unmatched: bool = False) -> StoreLayout:
    """A one-trial :class:`StoreLayout` of :func:`image_records` (evaluation rule
    ``market``), ready for :func:`reidcli.features.extract.extract_handcrafted_store` or
    :func:`reidcli.features.model_extract.extract_model_store`."""
    frame, where = image_records(images, query_images, images_list, pattern=pattern,
                                 skip_unmatched=skip_unmatched)
    parts = {s: frame[frame["split"] == s].reset_index(drop=True) if (frame["split"] == s).any()
             else empty_frame() for s in ("train", "query", "gallery")}
    split = DatasetSplit(name=DATASET, train=parts["train"], query=parts["query"],
                         gallery=parts["gallery"], eval_rule="market", protocol="standard",
                         options={"source": where})
    layout = layout_from_splits(DATASET, [split])
    layout.options["trials"] = [0]
    given = tuple(where[k] for k in ("images", "query_images", "images_list") if k in where)
    if len(given) > 1:                      # recorded here, as the provenance would one input
        from reidcli.provenance import sha256_listing
        where["listing_sha256"] = {p: sha256_listing(p) for p in given}
    return ImageLayout(**{f.name: getattr(layout, f.name)
                          for f in dataclasses.fields(StoreLayout)}, given=given)


def split_counts(layout: StoreLayout) -> str:
    """``"3 query, 12 gallery"`` of a layout's rows (for the CLI's summary line)."""
    counts = layout.records["split"].value_counts()
    return ", ".join(f"{int(counts[s])} {s}" for s in ("query", "gallery", "train")
                     if s in counts)




@dataclasses.dataclass
class ImageSource:
    """What ``reid extract --images/--query-images/--images-list`` names; :meth:`layout`
    reads the rows once (errors up front, before a model loads)."""

    images: str | os.PathLike | None = None
    query_images: str | os.PathLike | None = None
    images_list: str | os.PathLike | None = None
    pattern: str | None = None
    skip_unmatched: bool = False
    _layout: StoreLayout | None = dataclasses.field(default=None, repr=False)

    def layout(self) -> StoreLayout:
        if self._layout is None:
            self._layout = image_layout(self.images, self.query_images, self.images_list,
                                        pattern=self.pattern,
                                        skip_unmatched=self.skip_unmatched)
        return self._layout

    def summary(self) -> str:
        """One line: where the rows came from, how many per split, labelled or not."""
        layout = self.layout()
        where = layout.options.get("source", {})
        folders = where.get("split_folders")
        text = (f"images: {split_counts(layout)} rows"
                + (f" (split folders {', '.join(f + '/' for f in folders)})" if folders else "")
                + ("" if where.get("labelled") else ", unlabelled (pid -1)"))
        skipped = where.get("skipped_unmatched", 0)
        names = [os.path.basename(p) for p in layout.records["path"]]
        market = re.compile(PATTERNS["market"])
        if not where.get("labelled") and all(market.search(n) for n in names):
            text += f"; the names look like Market's: {param('pattern', 'market')} reads them"
        return text + (f"; {skipped} file(s) not matching the pattern skipped"
                       if skipped else "")


__all__ = ["DATASET", "PATTERNS", "SPLIT_FOLDERS", "ImageSource", "NamePattern",
           "compile_pattern", "images_under", "image_records", "image_layout", "split_counts"]
