"""Parser of the Market-1501 folder layout, shared by ``market1501``, ``dukemtmc`` and
``synthetic`` (docs/datasets.md).

Layout: ``bounding_box_train/`` → train, ``query/`` → query, ``bounding_box_test/`` →
gallery. File names carry the pid, the 1-based camera and a frame index; the regular
expression is per dataset (named groups ``pid``, ``cam``, ``frame`` and optionally ``seq``,
``bbox``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.errors import DatasetError

#: Market-1501 names, e.g. ``0002_c1s1_000451_03.jpg``; junk ``-1_c1s1_000401_03.jpg``.
#: The camera digit is checked against ``cam_range`` separately (synthetic uses c1..c9).
MARKET_NAME = re.compile(
    r"^(?P<pid>-1|\d{4})_c(?P<cam>\d)s(?P<seq>\d)_(?P<frame>\d{6})_(?P<bbox>\d{2})\.jpg$")
#: DukeMTMC-reID names, e.g. ``0005_c2_f0046985.jpg``.
DUKE_NAME = re.compile(r"^(?P<pid>\d{4})_c(?P<cam>\d)_f(?P<frame>\d{7})\.jpg$")

#: folder name → split
MARKET_SPLIT_FOLDERS: dict[str, str] = {
    "bounding_box_train": "train", "query": "query", "bounding_box_test": "gallery"}

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def list_images(folder: Path) -> list[str]:
    """File names of the images directly inside ``folder``, sorted by byte order."""
    with os.scandir(folder) as entries:
        names = [e.name for e in entries
                 if e.is_file() and e.name.lower().endswith(IMAGE_SUFFIXES)]
    return sorted(names, key=lambda n: n.encode())


def parse_market_folder(
    folder: str | Path,
    split: str,
    *,
    dataset: str,
    domain: str | None = None,
    pattern: re.Pattern = MARKET_NAME,
    cam_range: tuple[int, int] = (1, 6),
    max_pid: int | None = None,
    keep_junk: bool = False,
    modality_of_cam: Callable[[int], str] | Mapping[int, str] | None = None,
    pid_scope: str | None = None,
) -> pd.DataFrame:
    """Parse one Market-style image folder into a record table.

    Parameters
    ----------
    folder: the image folder (e.g. ``.../bounding_box_test``).
    split: the split its records get (``train``/``query``/``gallery``).
    pattern: file-name regex with named groups ``pid``, ``cam``, ``frame`` (+ ``seq``, ``bbox``).
    cam_range: allowed 1-based camera numbers, inclusive.
    keep_junk: keep ``-1`` (junk) files; dropped by default (docs/datasets.md).
    modality_of_cam: 0-based camid → ``visible``/``infrared`` (default all visible).

    Returns a record table with ``frame`` from the name and ``x_sequence``/``x_bbox`` when the
    pattern has them. Raises :class:`DatasetError` naming the first malformed file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"missing folder {folder}",
                           "check the dataset root; `reid data info` shows the expected tree")
    rows = []
    lo, hi = cam_range
    for name in list_images(folder):
        m = pattern.match(name)
        if m is None:
            raise DatasetError(f"malformed image name {folder / name}",
                               f"expected names like the pattern {pattern.pattern}")
        pid = int(m["pid"])
        cam = int(m["cam"])
        if not lo <= cam <= hi:
            raise DatasetError(f"camera c{cam} out of range {lo}..{hi} in {folder / name}",
                               "this file does not belong to the dataset; remove it")
        if max_pid is not None and pid > max_pid:
            raise DatasetError(f"pid {pid} above {max_pid} in {folder / name}",
                               "this file does not belong to the dataset; remove it")
        if pid == -1 and not keep_junk:
            continue
        camid = cam - 1
        if modality_of_cam is None:
            modality = "visible"
        elif callable(modality_of_cam):
            modality = modality_of_cam(camid)
        else:
            modality = modality_of_cam.get(camid, "visible")
        row = {"path": str(folder / name), "pid": pid, "camid": camid, "split": split,
               "modality": modality, "dataset": dataset, "domain": domain or dataset,
               "frame": int(m["frame"]), "x_raw_name": name}
        groups = m.groupdict()
        if groups.get("seq") is not None:
            row["x_sequence"] = int(groups["seq"])
        if groups.get("bbox") is not None:
            row["x_bbox"] = int(groups["bbox"])
        if pid_scope is not None:
            row["x_pid_scope"] = pid_scope
        rows.append(row)
    if not rows:
        return empty_frame()
    return normalize_frame(pd.DataFrame(rows))


def load_market_layout(
    root: str | Path,
    *,
    dataset: str,
    domain: str | None = None,
    pattern: re.Pattern = MARKET_NAME,
    cam_range: tuple[int, int] = (1, 6),
    max_pid: int | None = None,
    keep_junk: bool = False,
    modality_of_cam=None,
    name: str | None = None,
    options: dict | None = None,
) -> DatasetSplit:
    """Load a whole Market-layout tree (train/query/gallery folders) as a :class:`DatasetSplit`.

    Evaluated with rule E1 (``market``).
    """
    root = Path(root)
    parts = {}
    for folder, split in MARKET_SPLIT_FOLDERS.items():
        parts[split] = parse_market_folder(
            root / folder, split, dataset=dataset, domain=domain, pattern=pattern,
            cam_range=cam_range, max_pid=max_pid, keep_junk=keep_junk,
            modality_of_cam=modality_of_cam)
    return DatasetSplit(name=name or dataset, train=parts["train"], query=parts["query"],
                        gallery=parts["gallery"], eval_rule="market", protocol="standard",
                        options=dict(options or {}))


def split_summary(frame: pd.DataFrame) -> dict[str, int]:
    """``{"images", "ids", "cams"}`` of a record table (ids counted over global keys)."""
    if len(frame) == 0:
        return {"images": 0, "ids": 0, "cams": 0}
    ids = frame[["dataset", "domain", "pid"]].drop_duplicates()
    cams = frame[["domain", "camid"]].drop_duplicates()
    return {"images": int(len(frame)), "ids": int(len(ids)), "cams": int(len(cams))}


__all__ = ["MARKET_NAME", "DUKE_NAME", "parse_market_folder", "load_market_layout",
           "list_images", "split_summary"]
