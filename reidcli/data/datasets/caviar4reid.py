"""CAVIAR4REID (docs/datasets.md): ``CAVIARa/PPPPNNN.jpg`` — pid = PPPP (0001..0072), image
number NNN (001..020, ``frame``).

50 persons appear in both cameras with 20 images, 22 in one camera only with 10 (1,220
images, 72 persons). The release names no camera: reidcli takes images 001–010 as camera 0
and 011–020 as camera 1 (``camid = (NNN − 1) // 10``) — a toolkit assumption, unconfirmed
(docs/datasets.md; public loaders ignore the camera). Under the default ``same_camera=keep``
the evaluation never uses it.

Protocol (eval E3′ = rule ``single_shot_any`` by default): ``warca`` only (WARCA paper
Sect. 4.1) — P = ``test_ids`` (36) persons per split (10 seeded splits), every other person
trains; ``draws`` (10) probe/gallery draws per split, ``warca_draw`` = ``probe_single`` (one
probe per test id, its other images the gallery; default) | ``gallery_single``;
``same_camera`` = ``keep`` (default: Xiong et al.'s rule, which has no camera labels) |
``drop`` (E3 with the assumed cameras).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.datasets.warca_only import load_warca_only, warca_only_notes, warca_only_options
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register
from reidcli.errors import DatasetError

NAME = re.compile(r"^(\d{4})(\d{3})\.jpg$")
#: images per camera: NNN 001..010 → camera 0, 011..020 → camera 1 (toolkit assumption)
IMAGES_PER_CAMERA = 10
MAX_IMAGE_NUMBER = 2 * IMAGES_PER_CAMERA
PROTOCOLS = ("warca",)
#: WARCA paper Sect. 4.1: P = 36 test persons per split
TEST_IDS = 36

INFO = DatasetInfo(
    name="caviar4reid", title="CAVIAR4REID", aliases=("caviar",),
    url="CAVIAR4REID.zip from the authors' page (Cheng et al., BMVC 2011), "
        "http://www.lorisbazzani.info/caviar4reid.html",
    license="research use (terms of the CAVIAR4REID page, treated as research-only); "
            "reidcli never downloads it",
    tree="caviar4reid/CAVIARa/   (or CAVIARa/, CAVIAR4REID/CAVIARa/, caviar4reid/)\n"
         "  PPPPNNN.jpg (1,220 images, 72 persons; PPPP person 0001-0072, NNN image 001-020;\n"
         "  50 persons × 20 images in 2 cameras, 22 persons × 10 images in one camera)",
    candidates=("caviar4reid/CAVIARa", "CAVIARa", "CAVIAR4REID/CAVIARa", "caviar4reid"),
    cameras="2 (assumed from the image number)",
    counts={"query": (TEST_IDS, TEST_IDS)},
    options=warca_only_options(TEST_IDS),
    protocol="warca (10 seeded splits × 10 draws: 36 test ids, one probe each, their other "
             "images the gallery; the other 36 persons train)",
    notes=("camid = (NNN − 1) // 10: images 001-010 camera 0, 011-020 camera 1 (assumed)",
           "train and gallery sizes vary with the split (persons have 10 or 20 images); "
           "`reid data check` compares the query only",
           *warca_only_notes(TEST_IDS)),
    unconfirmed=("camera of an image — 001-010 = camera 0, 011-020 = camera 1 "
                 "is a toolkit assumption (public loaders ignore the camera; "
                 "docs/datasets.md)",
                 "address of the download page (the authors' page has moved "
                 "over the years)",
                 "exact licence text of the release page (treated as "
                 "research-only)"))


def looks_like_caviar4reid(path: Path) -> bool:
    """A folder with at least one file named like ``PPPPNNN.jpg``."""
    return any(NAME.match(c.name) for c in path.iterdir())


def read_caviar4reid(folder: Path) -> pd.DataFrame:
    """All ``PPPPNNN.jpg`` images of the folder as one record table sorted by path."""
    records = rows_to_frame(scan_folder(folder, NAME, "caviar4reid", lambda m, p: {
        "path": p, "pid": int(m.group(1)),
        "camid": (int(m.group(2)) - 1) // IMAGES_PER_CAMERA,
        "frame": int(m.group(2))}), "caviar4reid")
    bad = records[(records["pid"] == 0) | (records["frame"] < 1)
                  | (records["frame"] > MAX_IMAGE_NUMBER)]
    if len(bad):
        raise DatasetError(f"caviar4reid: malformed image name {bad['path'].iloc[0]}",
                           "persons are numbered from 0001 and images "
                           f"001..{MAX_IMAGE_NUMBER:03d} (see `reid data info caviar4reid`)")
    return records


def load_caviar4reid(root=None, trial: int = 0, protocol: str = "warca", seed: int = 0,
                     test_ids: int = TEST_IDS, draws: int = 10,
                     warca_draw: str = "probe_single",
                     same_camera: str = "keep") -> DatasetSplit:
    """Load CAVIAR4REID trial ``trial`` (0..10·draws−1) of the ``warca`` protocol."""
    return load_warca_only("caviar4reid", read_caviar4reid, root, trial, protocol=protocol,
                           seed=seed, test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                           same_camera=same_camera)


register(INFO, load_caviar4reid, looks_like_caviar4reid)
