"""3DPeS, re-identification snapshots (docs/datasets.md): ``3DPeS/RGB/<pid>_<cam>_<rest>.bmp``
— pid = the first ``_``-separated field, camera = the second (1-based; ``camid = cam − 1``),
the rest (frame information) is kept in ``x_name_rest`` and never parsed.

The WARCA paper (Sect. 4.1) counts 192 persons / 1,011 images (2–6 per person, 8 cameras);
public copies may hold 193 / 1,012: one person with a single image, which never tests (only
persons with ≥ 2 images do) but trains.

Protocol (eval E3′ = rule ``single_shot_any`` by default): ``warca`` only — P = ``test_ids``
(95) persons per split (10 seeded splits), every other person trains; ``draws`` (10)
probe/gallery draws per split, ``warca_draw`` = ``probe_single`` (default) |
``gallery_single``; ``same_camera`` = ``keep`` (default: Xiong et al.'s rule, which uses no
camera labels) | ``drop`` (E3).
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

#: ``<pid>_<cam>[_<rest>].bmp``; the rest is frame information, accepted as it is
NAME = re.compile(r"^(\d+)_(\d+)(?:_(.*))?\.bmp$", re.IGNORECASE)
PROTOCOLS = ("warca",)
#: WARCA paper Sect. 4.1: P = 95 test persons per split
TEST_IDS = 95

INFO = DatasetInfo(
    name="3dpes", title="3DPeS (3D People Surveillance, re-identification snapshots)",
    aliases=("threedpes",),
    url="http://imagelab.ing.unimore.it/3DPeS/3dPES_data/3DPeS_ReId_Snap.zip "
        "(page http://imagelab.ing.unimore.it/3DPeS/)",
    license="research use (terms of the 3DPeS page, treated as research-only); "
            "reidcli never downloads it",
    tree="3dpes/3DPeS/RGB/   (or 3DPeS/RGB/, 3dpes/RGB/)\n"
         "  <pid>_<cam>_<rest>.bmp (1,011 images, 192 persons, 2-6 each, cameras 1-8;\n"
         "  copies with 1,012 / 193 hold one single-image person, used for training only)",
    candidates=("3dpes/3DPeS/RGB", "3DPeS/RGB", "3dpes/RGB"),
    cameras="8",
    counts={"query": (TEST_IDS, TEST_IDS)},
    options=warca_only_options(TEST_IDS),
    protocol="warca (10 seeded splits × 10 draws: 95 test ids, one probe each, their other "
             "images the gallery; the other persons train)",
    notes=("pid = first name field, camid = second field − 1; the rest of the name "
           "(x_name_rest) is not interpreted",
           "persons with one image are never test persons (they train)",
           "train and gallery sizes vary with the split; `reid data check` compares the "
           "query only",
           *warca_only_notes(TEST_IDS)),
    unconfirmed=("meaning of the name fields after the camera (frame information; "
                 "docs/datasets.md)",
                 "image count of the public archive: 1,011 / 192 (WARCA paper) or 1,012 / 193 "
                 "(one single-image person)",
                 "exact licence text of the 3DPeS page (treated as research-only)"))


def looks_like_3dpes(path: Path) -> bool:
    """A folder with at least one file named like ``<pid>_<cam>_<rest>.bmp``."""
    return any(NAME.match(c.name) for c in path.iterdir())


def read_3dpes(folder: Path) -> pd.DataFrame:
    """All ``.bmp`` snapshots of the folder as one record table sorted by path."""
    records = rows_to_frame(scan_folder(folder, NAME, "3dpes", lambda m, p: {
        "path": p, "pid": int(m.group(1)), "camid": int(m.group(2)) - 1,
        "x_name_rest": m.group(3) or ""}), "3dpes")
    bad = records[(records["pid"] == 0) | (records["camid"] < 0)]
    if len(bad):
        raise DatasetError(f"3dpes: malformed image name {bad['path'].iloc[0]}",
                           "persons and cameras are numbered from 1 "
                           "(see `reid data info 3dpes`)")
    return records


def load_3dpes(root=None, trial: int = 0, protocol: str = "warca", seed: int = 0,
               test_ids: int = TEST_IDS, draws: int = 10, warca_draw: str = "probe_single",
               same_camera: str = "keep") -> DatasetSplit:
    """Load 3DPeS trial ``trial`` (0..10·draws−1) of the ``warca`` protocol."""
    return load_warca_only("3dpes", read_3dpes, root, trial, protocol=protocol, seed=seed,
                           test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                           same_camera=same_camera)


register(INFO, load_3dpes, looks_like_3dpes)
