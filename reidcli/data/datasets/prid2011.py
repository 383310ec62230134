"""PRID2011, single-shot version (docs/datasets.md): ``single_shot/cam_a/person_NNNN.png``
(0001..0385) and ``single_shot/cam_b/person_NNNN.png`` (0001..0749). Persons 0001-0200 are
seen by both cameras (same number = same person); above 0200 each camera shows its own people
although the numbers repeat. Records: ``camid`` 0 = cam_a, 1 = cam_b; ``pid`` = NNNN for the
shared persons, ``10000·(camid + 1) + NNNN`` above (cam_a-only 10201.., cam_b-only 20201..);
``x_native_pid`` keeps NNNN.

Protocols (10 seeded trials, eval E3 = rule ``market``; both draw the same test persons per
trial):

* ``dg`` (default; DIMN, DualNorm, DMG-Net): ``test_ids`` (100) of the ``shared_ids`` (200)
  shared persons; probe = their cam_a images, gallery = their cam_b images plus every cam_b-only
  person (0201-0749: 549 images) = 649. No training images.
* ``half`` (torchreid, supervised): the same test half and gallery construction; train = both
  images of the other shared persons (100).

cam_a-only persons (0201-0385) are never used. (``multi_shot/`` — the video version — is out
of scope.)
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.trials import (Pool, check_choice, check_int, check_seed, check_test_ids,
                                 two_view_trials)
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError
from reidcli.naming import param

NAME = re.compile(r"^person_(\d{4})\.png$")
VIEWS = {"cam_a": 0, "cam_b": 1}
PROTOCOLS = ("dg", "half")
TEST_IDS = 100
SHARED_IDS = 200

INFO = DatasetInfo(
    name="prid2011", title="PRID 2011 (single-shot)", aliases=("prid",),
    url="https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/PRID11/",
    license="research use (terms on the TU Graz page, treated as research-only); "
            "reidcli never downloads it",
    tree="prid2011/prid_2011/single_shot/   (or prid_2011/single_shot/, "
         "prid2011/single_shot/)\n"
         "  cam_a/  person_0001.png .. person_0385.png\n"
         "  cam_b/  person_0001.png .. person_0749.png\n"
         "  (0001-0200 are the same persons in both; multi_shot/ is not used)",
    candidates=("prid2011/prid_2011/single_shot", "prid_2011/single_shot",
                "prid2011/single_shot", "single_shot", "."),
    cameras="2",
    counts={"query": (100, 100), "gallery": (649, 649)},
    options={"protocol": "dg", "seed": 0, "test_ids": TEST_IDS, "shared_ids": SHARED_IDS},
    protocol="dg (10 seeded trials: 100 of the 200 shared persons; probe = their cam_a "
             "images, gallery = their cam_b images + cam_b persons 0201-0749; no training)",
    notes=("persons above shared_ids (0200) differ between the cameras: pid = "
           "10000·(camid + 1) + number; x_native_pid keeps the number",
           "protocol=half: the other shared persons train with both images",
           "cam_a persons 0201-0385 are never used",
           "test_ids=N / shared_ids=N scale the protocol (e.g. for a partial copy)"),
    unconfirmed=("exact licence text of the PRID 2011 page (treated as research-only; "
                 "docs/datasets.md)",))


def looks_like_prid2011(path: Path) -> bool:
    """Both camera folders, with a ``person_NNNN.png`` in ``cam_a/``."""
    a, b = path / "cam_a", path / "cam_b"
    return a.is_dir() and b.is_dir() and any(NAME.match(c.name) for c in a.iterdir())


def person_id(number: int, camid: int, shared_ids: int = SHARED_IDS) -> int:
    """pid of ``person_<number>`` in camera ``camid``: the number for shared persons, else
    ``10000·(camid + 1) + number`` (the two cameras' own persons never merge)."""
    return number if number <= shared_ids else 10000 * (camid + 1) + number


def read_prid2011(folder: Path, shared_ids: int = SHARED_IDS) -> pd.DataFrame:
    """Both camera folders as one record table sorted by path; DatasetError when a shared
    person lacks its image in the other camera, or when a number is 0000."""
    rows = []
    for view, camid in VIEWS.items():
        rows += scan_folder(folder / view, NAME, "prid2011", lambda m, p, c=camid: {
            "path": p, "camid": c, "x_native_pid": int(m.group(1)),
            "pid": person_id(int(m.group(1)), c, shared_ids)})
    records = rows_to_frame(rows, "prid2011")
    zero = records[records["x_native_pid"] == 0]
    if len(zero):
        raise DatasetError(f"prid2011: malformed image name {zero['path'].iloc[0]}",
                           "persons are numbered from person_0001")
    shared = records[records["pid"] <= shared_ids]
    numbers = {c: set(shared.loc[shared["camid"] == c, "pid"]) for c in VIEWS.values()}
    for view, camid in VIEWS.items():
        other = [v for v in VIEWS if v != view][0]
        missing = sorted(numbers[camid] - numbers[VIEWS[other]])
        if missing:
            raise DatasetError(
                f"prid2011: {folder / other / f'person_{missing[0]:04d}.png'} is missing "
                f"(persons 0001-{shared_ids:04d} appear in both cameras; "
                f"{folder / view / f'person_{missing[0]:04d}.png'} exists)",
                f"restore the file, or pass {param('shared_ids', 'N')} if the copy shares "
                "only the first N persons")
    return records


def load_prid2011(root=None, trial: int = 0, protocol: str = "dg", seed: int = 0,
                  test_ids: int = TEST_IDS, shared_ids: int = SHARED_IDS) -> DatasetSplit:
    """Load PRID2011 trial ``trial`` (0..9) of ``protocol`` (``dg`` | ``half``)."""
    protocol = check_choice("prid2011", "protocol", protocol, PROTOCOLS)
    seed = check_seed("prid2011", seed)
    test_ids = check_int("prid2011", "test_ids", test_ids)
    shared_ids = check_int("prid2011", "shared_ids", shared_ids)
    folder = resolve_dataset_dir("prid2011", root)
    pool = Pool.of("prid2011", folder, read_prid2011(folder, shared_ids))
    eligible = pool.ids_in_views(0, 1)
    eligible = eligible[eligible <= shared_ids]
    check_test_ids(pool, protocol, test_ids, eligible, "shared persons (0001-"
                   f"{shared_ids:04d} seen by both cameras)")
    gallery_only = (pool.cams == VIEWS["cam_b"]) & (pool.pids > shared_ids)
    trials = pool.cached(
        f"prid2011_{protocol}_p{test_ids}_shared{shared_ids}_seed{seed}",
        lambda: two_view_trials(pool, test_ids=test_ids, seed=seed, eligible=eligible,
                                with_train=protocol == "half", gallery_extra=gallery_only))
    return pool.split(trials, trial, protocol=protocol,
                      options={"protocol": protocol, "seed": seed, "test_ids": test_ids,
                               "shared_ids": shared_ids})


register(INFO, load_prid2011, looks_like_prid2011)
