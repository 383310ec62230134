"""CUHK02 (docs/datasets.md): ``Dataset/P1..P5/{cam1,cam2}/*.png``, five camera pairs.

The person id is the first ``_``-separated token of the file name and is unique only within a
pair folder, so ``pid = pair·10000 + token``; each pair has its own two cameras, ``camid =
2·(pair − 1) + (cam − 1)`` (10 views); ``x_pair`` = pair.

Protocols (fixed, not seeded; one trial): ``p5_test`` (default) — P1-P4 train, P5 cam1 → query,
P5 cam2 → gallery (E1 = rule ``market``); ``all_train`` — every image is train (a source of
the DG "Mixed A" benchmark, docs/datasets.md).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import require_dir, rows_to_frame, scan_folder
from reidcli.data.trials import check_choice
from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial
from reidcli.errors import DatasetError

NAME = re.compile(r"^(\d+)_[^/]*\.png$")
PAIRS = (1, 2, 3, 4, 5)
TEST_PAIR = 5
PROTOCOLS = ("p5_test", "all_train")

INFO = DatasetInfo(
    name="cuhk02", title="CUHK02",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (access on request)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk02/Dataset/   (or Dataset/, cuhk02/)\n"
         "  P1/cam1/ P1/cam2/  (971 persons)   P2/ (306)   P3/ (107)   P4/ (193)   P5/ (239)\n"
         "  names <id>_<...>.png, 2 images per person per camera (160×60)",
    candidates=("cuhk02/Dataset", "Dataset", "cuhk02", "CUHK02/Dataset", "CUHK02", "."),
    cameras="10 (2 per pair)",
    counts={"train": (6308, 1577), "query": (478, 239), "gallery": (478, 239)},
    options={"protocol": "p5_test"},
    protocol="p5_test (P1-P4 train; P5 cam1 → query, P5 cam2 → gallery)",
    notes=("pids are unique only within a pair folder: pid = pair·10000 + id",
           "camid = 2·(pair − 1) + (cam − 1): each pair has its own two cameras",
           "protocol=all_train: every image is train (DG Mixed A source)",
           "P1 is CUHK01: never train on CUHK02 when testing on CUHK01"),
    unconfirmed=("total image count 7,264 (the Person30K paper says 7,267; "
                 "docs/datasets.md)",))


def looks_like_cuhk02(path: Path) -> bool:
    return (path / "P1").is_dir() and (path / f"P{TEST_PAIR}").is_dir()


def read_cuhk02(folder: Path) -> pd.DataFrame:
    """All images of the five pairs as one record table sorted by path."""
    rows = []
    for pair in PAIRS:
        require_dir(folder / f"P{pair}", "cuhk02")
        for cam in (1, 2):
            rows += scan_folder(folder / f"P{pair}" / f"cam{cam}", NAME, "cuhk02",
                                lambda m, p, a=pair, c=cam: {
                                    "path": p, "pid": a * 10000 + int(m.group(1)),
                                    "camid": 2 * (a - 1) + (c - 1), "x_pair": a})
    records = rows_to_frame(rows, "cuhk02")
    big = records[records["pid"] - records["x_pair"] * 10000 >= 10000]
    if len(big):
        raise DatasetError(f"cuhk02: person id of {big['path'].iloc[0]} is ≥ 10000",
                           "CUHK02 person ids have at most 4 digits; restore the release")
    return records


def _part(records: pd.DataFrame, mask, split: str) -> pd.DataFrame:
    frame = records[mask].copy()
    frame["split"] = split
    return normalize_frame(frame.reset_index(drop=True))


def load_cuhk02(root=None, trial: int = 0, protocol: str = "p5_test") -> DatasetSplit:
    """Load CUHK02 (``p5_test`` | ``all_train``; one trial, 0)."""
    protocol = check_choice("cuhk02", "protocol", protocol, PROTOCOLS)
    check_trial("cuhk02", trial, 1, f"protocol {protocol!r}")
    folder = resolve_dataset_dir("cuhk02", root)
    records = read_cuhk02(folder)
    pair = records["x_pair"].to_numpy()
    cam = records["camid"].to_numpy()
    if protocol == "all_train":
        train, query, gallery = _part(records, pair > 0, "train"), empty_frame(), empty_frame()
    else:
        test_cams = (2 * (TEST_PAIR - 1), 2 * (TEST_PAIR - 1) + 1)
        train = _part(records, pair != TEST_PAIR, "train")
        query = _part(records, (pair == TEST_PAIR) & (cam == test_cams[0]), "query")
        gallery = _part(records, (pair == TEST_PAIR) & (cam == test_cams[1]), "gallery")
    return DatasetSplit(name="cuhk02", train=train, query=query, gallery=gallery,
                        eval_rule="market", trial=0, num_trials=1, protocol=protocol,
                        options={"protocol": protocol})


register(INFO, load_cuhk02, looks_like_cuhk02)
