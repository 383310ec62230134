"""OPeRID v1.0 ("OpeReid"; Liao et al., Open-set Person Re-identification, arXiv 1408.0872;
docs/datasets.md): 200 persons, 7,413 images, 6 cameras.

The release's on-disk layout could not be established from public sources, so this loader
reads a documented **toolkit layout**, every part of it unconfirmed: images anywhere under the
dataset folder (sub-folders searched recursively), named ``<pid>_<cam>_<anything>.<png|jpg|bmp>``
with an integer pid ≥ 1 and a camera 1..6 (``camid = cam − 1``). Any other image name is an
error saying what layout is expected; a copy laid out otherwise can be renamed into it, or
featurised by another tool and brought in with ``reid store import``.

Protocol (eval E3′ = rule ``single_shot_any`` by default): ``warca`` only (WARCA paper
Sect. 4.1) — P = ``test_ids`` (119) persons per split (10 seeded splits), every other person
trains; ``draws`` (10) probe/gallery draws per split, ``warca_draw`` = ``probe_single``
(default) | ``gallery_single``; ``same_camera`` = ``keep`` (default) | ``drop`` (E3).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

import pandas as pd

from reidcli.data.datasets.common import rows_to_frame
from reidcli.data.datasets.market_folder import IMAGE_SUFFIXES
from reidcli.data.datasets.warca_only import load_warca_only, warca_only_notes, warca_only_options
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register
from reidcli.errors import DatasetError

#: ``<pid>_<cam>_<anything>.<png|jpg|bmp>`` (toolkit layout, unconfirmed)
NAME = re.compile(r"^(\d+)_(\d+)_(.*)\.(?:png|jpg|bmp)$", re.IGNORECASE)
NUM_CAMERAS = 6
PROTOCOLS = ("warca",)
#: WARCA paper Sect. 4.1: P = 119 test persons per split
TEST_IDS = 119
#: what a wrongly named image is told (one line)
LAYOUT_HINT = ("reidcli reads OPeRID in a toolkit layout (unconfirmed): images anywhere under "
               "opereid/ named <pid>_<cam>_<anything>.png|jpg|bmp with pid ≥ 1 and cam 1..6; "
               "rename your copy into it, or compute features with your own tool and run "
               "`reid store import --features F.npy --labels labels.csv` (CSV columns "
               "pid,camid,split[,path])")

INFO = DatasetInfo(
    name="opereid", title="OPeRID v1.0 (Open-set Person Re-identification)",
    aliases=("operid",),
    url="http://www.cbsr.ia.ac.cn/users/scliao/projects/operidv1/index.html (licence "
        "agreement required; also "
        "https://shengcailiao.github.io/projects/"
        "Open-set_Person_Re-identification_Database_and_Evaluation_v1.0.html)",
    license="licence agreement with the authors (CBSR, CASIA) required; no redistribution — "
            "reidcli never downloads it",
    tree="opereid/   (or OPeRID/, OpeReid/)\n"
         "  **/<pid>_<cam>_<anything>.png|jpg|bmp (any sub-folders; pid ≥ 1, cam 1-6;\n"
         "  7,413 images, 200 persons) — a toolkit layout: the release's own is unconfirmed",
    candidates=("opereid", "OPeRID", "OpeReid"),
    cameras="6",
    counts={"query": (TEST_IDS, TEST_IDS)},
    options=warca_only_options(TEST_IDS),
    protocol="warca (10 seeded splits × 10 draws: 119 test ids, one probe each, their other "
             "images the gallery; the other persons train)",
    notes=("layout is a toolkit convention (the release's file naming is unconfirmed): "
           "images in any sub-folder, <pid>_<cam>_<anything>.png|jpg|bmp, camid = cam − 1",
           "a copy in another layout: rename it, or import features made elsewhere with "
           "`reid store import --features F.npy --labels labels.csv` (pid,camid,split[,path])",
           "persons with one image are never test persons (they train)",
           "train and gallery sizes vary with the split; `reid data check` compares the "
           "query only",
           *warca_only_notes(TEST_IDS)),
    unconfirmed=("on-disk layout and file naming of the OPeRID release: reidcli reads a "
                 "toolkit layout, **/<pid>_<cam>_<anything>.png|jpg|bmp (docs/datasets.md)",
                 "camera numbering 1..6 in the file name (toolkit layout)",
                 "exact licence agreement text (obtained from the authors)"))


def _image_files(folder: Path) -> Iterator[Path]:
    """Every image file under ``folder`` (recursive; hidden folders skipped), in byte order
    of the path."""
    found = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(here) / f for f in files if f.lower().endswith(IMAGE_SUFFIXES)]
    return iter(sorted(found, key=lambda p: p.as_posix().encode()))


def looks_like_opereid(path: Path) -> bool:
    """Some image file lies under the folder (its name is checked when read)."""
    return next(_image_files(path), None) is not None


def read_opereid(folder: Path) -> pd.DataFrame:
    """All images under ``folder`` as one record table sorted by path; a DatasetError names
    the first file outside the toolkit layout."""
    rows = []
    for path in _image_files(folder):
        match = NAME.match(path.name)
        cam = int(match.group(2)) if match else 0
        if match is None or int(match.group(1)) == 0 or not 1 <= cam <= NUM_CAMERAS:
            raise DatasetError(f"opereid: malformed image name {path}", LAYOUT_HINT)
        rows.append({"path": path, "pid": int(match.group(1)), "camid": cam - 1})
    return rows_to_frame(rows, "opereid")


def load_opereid(root=None, trial: int = 0, protocol: str = "warca", seed: int = 0,
                 test_ids: int = TEST_IDS, draws: int = 10, warca_draw: str = "probe_single",
                 same_camera: str = "keep") -> DatasetSplit:
    """Load OPeRID trial ``trial`` (0..10·draws−1) of the ``warca`` protocol."""
    return load_warca_only("opereid", read_opereid, root, trial, protocol=protocol, seed=seed,
                           test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                           same_camera=same_camera)


register(INFO, load_opereid, looks_like_opereid)
