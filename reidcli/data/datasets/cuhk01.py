"""CUHK01 (docs/datasets.md): ``campus/PPPPNNN.png`` — pid = PPPP (1..971), image number NNN
(001..004); ``camid = (NNN − 1) // 2`` (001-002 = view A → 0, 003-004 = view B → 1),
``frame = NNN``.

If the folder holds only ``CUHK01.zip``, it is extracted once into ``campus/``: into a
temporary folder next to it, which is renamed (``os.replace``) to ``campus/`` when complete,
so an interrupted extraction never leaves a half-filled ``campus/``.

Protocols (10 seeded trials, eval E3 = rule ``market``):

* ``single_shot`` (default; C-DPCF): ``test_ids`` (486) random test persons, the other 485
  train with all 4 images; per trial and test person one random view-A image is the probe and
  one random view-B image the gallery entry.
* ``multi_shot``: same persons; probe = both view-A images, gallery = both view-B images.
* ``warca`` (docs/datasets.md): P = ``test_ids`` per split, ``draws`` draws per split,
  ``warca_draw`` = ``probe_single`` (default: one probe, 3 gallery images) |
  ``gallery_single``. WARCA does not say whether same-view matches are excluded; with the
  default ``same_camera=drop`` the E1 rule ignores gallery images of the probe's own view.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.trials import (Pool, check_choice, check_int, check_seed, check_test_ids,
                                 load_warca, two_view_trials)
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError

NAME = re.compile(r"^(\d{4})(00[1-4])\.png$")
#: any 7-digit png name (names outside 001..004 are reported as malformed)
LOOSE_NAME = re.compile(r"^\d{7}\.png$", re.IGNORECASE)
ARCHIVE = "CUHK01.zip"
PROTOCOLS = ("single_shot", "multi_shot", "warca")
TEST_IDS = 486

INFO = DatasetInfo(
    name="cuhk01", title="CUHK01 (CUHK Campus)",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (access on request)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk01/   (or CUHK01/)\n"
         "  campus/  PPPPNNN.png (3,884 = 971 ids × 4; NNN 001-002 view A, 003-004 view B)\n"
         "  (or only CUHK01.zip: extracted into campus/ on first use)",
    candidates=("cuhk01", "CUHK01", "."),
    cameras="2 views",
    counts={"train": (1940, 485), "query": (486, 486), "gallery": (486, 486)},
    options={"protocol": "single_shot", "seed": 0, "test_ids": TEST_IDS, "draws": 10,
             "warca_draw": "probe_single", "same_camera": "drop"},
    protocol="single_shot (10 seeded trials: 485 train ids with all 4 images; 486 test ids "
             "with one random view-A probe and one random view-B gallery image)",
    notes=("camid = (NNN − 1) // 2: view A (001, 002) = 0, view B (003, 004) = 1; frame = NNN",
           "protocol=multi_shot: probe both view-A images, gallery both view-B images",
           "protocol=warca: test_ids (P=486) per split, draws per split (trial t = split "
           "t // draws, draw t % draws), warca_draw=probe_single|gallery_single, "
           "same_camera=drop|keep",
           "CUHK01 ⊂ CUHK02 (P1) and overlaps CUHK03: never train on them when testing here",
           "test_ids=N scales the test set (e.g. for a partial copy)"),
    unconfirmed=("WARCA's same-view exclusion is not stated; E1 removes same-view gallery "
                 "matches anyway (docs/datasets.md)",))


def looks_like_cuhk01(path: Path) -> bool:
    return (path / "campus").is_dir() or (path / ARCHIVE).is_file()


def _image_dir(tree: Path) -> Path | None:
    """The folder of an extracted archive holding the most ``PPPPNNN.png`` files."""
    best, count = None, 0
    for folder in [tree, *sorted(p for p in tree.rglob("*") if p.is_dir())]:
        n = sum(1 for c in folder.iterdir() if LOOSE_NAME.match(c.name))
        if n > count:
            best, count = folder, n
    return best


def campus_dir(folder: Path) -> Path:
    """``folder/campus``, extracted from ``folder/CUHK01.zip`` first if only the archive
    exists (atomic: extract into a temporary folder, then ``os.replace``)."""
    campus = folder / "campus"
    if campus.is_dir():
        return campus
    archive = folder / ARCHIVE
    if not archive.is_file():
        raise DatasetError(f"cuhk01: missing folder {campus} (and no {archive})",
                           "see `reid data info cuhk01` for the expected tree")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".campus-", suffix=".partial", dir=folder))
    except OSError as exc:
        raise DatasetError(f"cuhk01: cannot extract {archive} into {folder} ({exc})",
                           f"extract it yourself so that the images lie in {campus}") from None
    try:
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
        except (OSError, zipfile.BadZipFile) as exc:
            raise DatasetError(f"cuhk01: cannot extract {archive} ({exc})",
                               f"check the archive or extract it into {campus} yourself"
                               ) from None
        source = _image_dir(tmp)
        if source is None:
            raise DatasetError(f"cuhk01: {archive} holds no PPPPNNN.png image",
                               "use the CUHK01 release archive (campus/*.png)")
        try:
            os.replace(source, campus)
        except OSError:
            if not campus.is_dir():      # else another process extracted it meanwhile
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return campus


def read_cuhk01(folder: Path) -> pd.DataFrame:
    """All ``campus/`` images as one record table sorted by path."""
    campus = campus_dir(folder)
    rows = scan_folder(campus, NAME, "cuhk01", lambda m, p: {
        "path": p, "pid": int(m.group(1)), "camid": (int(m.group(2)) - 1) // 2,
        "frame": int(m.group(2))})
    records = rows_to_frame(rows, "cuhk01")
    zero = records[records["pid"] == 0]
    if len(zero):
        raise DatasetError(f"cuhk01: malformed image name {zero['path'].iloc[0]} (person 0000)",
                           "persons are numbered 0001..0971")
    return records


def load_cuhk01(root=None, trial: int = 0, protocol: str = "single_shot", seed: int = 0,
                test_ids: int = TEST_IDS, draws: int = 10,
                warca_draw: str = "probe_single", same_camera: str = "drop") -> DatasetSplit:
    """Load CUHK01 trial ``trial`` of ``protocol`` (single_shot | multi_shot | warca)."""
    protocol = check_choice("cuhk01", "protocol", protocol, PROTOCOLS)
    seed = check_seed("cuhk01", seed)
    test_ids = check_int("cuhk01", "test_ids", test_ids)
    folder = resolve_dataset_dir("cuhk01", root)
    pool = Pool.of("cuhk01", folder, read_cuhk01(folder))
    options = {"protocol": protocol, "seed": seed, "test_ids": test_ids}
    if protocol == "warca":
        return load_warca(pool, trial, seed=seed, test_ids=test_ids, draws=draws,
                          warca_draw=warca_draw, same_camera=same_camera,
                          options=options)
    eligible = pool.ids_in_views(0, 1)
    check_test_ids(pool, protocol, test_ids, eligible, "persons seen in both views")
    multi = protocol == "multi_shot"
    trials = pool.cached(f"cuhk01_{protocol}_p{test_ids}_seed{seed}",
                         lambda: two_view_trials(pool, test_ids=test_ids, seed=seed,
                                                 eligible=eligible, all_probe=multi,
                                                 all_gallery=multi))
    return pool.split(trials, trial, protocol=protocol, options=options)


register(INFO, load_cuhk01, looks_like_cuhk01)
