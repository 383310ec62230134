"""CUHK01 (datasets.md §5.5): ``campus/PPPPNNN.png``; images 001-002 = view A, 003-004 = B.

If only ``CUHK01.zip`` exists, it is extracted once into ``campus/`` (atomically: into a
temporary folder that is renamed when complete).
"""
from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.protocols import single_shot_half, warca_protocol
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError, UsageError

NAME = re.compile(r"^(\d{4})(\d{3})\.png$")

INFO = DatasetInfo(
    name="cuhk01", title="CUHK01 (CUHK Campus)",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (on request)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk01/\n  campus/  PPPPNNN.png (3,884: 971 ids × 4; NNN 001-002 view A, 003-004 view B)"
         "\n  (or CUHK01.zip, extracted on first use)",
    candidates=("cuhk01", "CUHK01", "."),
    cameras="2 views",
    counts={"train": (1940, 485), "query": (486, 486), "gallery": (486, 486)},
    options={"protocol": "single_shot", "seed": 0, "test_ids": 486, "draws": 1,
             "warca_draw": "gallery_single"},
    protocol="single_shot (10 trials: 485 train ids with all 4 images, 486 test ids with one "
             "random view-A probe and view-B gallery image)",
    notes=("CUHK01 ⊂ CUHK02 (P1) and overlaps CUHK03: never train on them when testing here",),
    unconfirmed=("WARCA's same-view exclusion (E1 is applied anyway)",))


def _campus(folder: Path) -> Path:
    campus = folder / "campus"
    if campus.is_dir():
        return campus
    archive = folder / "CUHK01.zip"
    if not archive.is_file():
        raise DatasetError(f"cuhk01: missing folder {campus} (and no {archive})",
                           "see `reid data info cuhk01` for the expected tree")
    tmp = folder / "campus.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DatasetError(f"cuhk01: cannot extract {archive} ({exc})",
                           "check the archive or extract it into campus/ yourself") from None
    inner = [p for p in tmp.rglob("*") if p.is_dir() and any(NAME.match(c.name)
                                                             for c in p.iterdir())]
    source = inner[0] if inner and not any(NAME.match(c.name) for c in tmp.iterdir()) else tmp
    os.replace(source, campus)
    shutil.rmtree(tmp, ignore_errors=True)
    return campus


def load_cuhk01(root=None, trial: int = 0, protocol: str = "single_shot", seed: int = 0,
                test_ids: int = 486, draws: int = 1, warca_draw: str = "gallery_single"):
    """Load one CUHK01 trial (single_shot | multi_shot | warca)."""
    folder = resolve_dataset_dir("cuhk01", root)
    campus = _campus(folder)
    rows = scan_folder(campus, NAME, "cuhk01", lambda m, p: {
        "path": p, "pid": int(m.group(1)), "camid": (int(m.group(2)) - 1) // 2,
        "frame": int(m.group(2))}, suffixes=(".png",))
    records = rows_to_frame(rows, "cuhk01")
    if protocol in ("single_shot", "multi_shot"):
        multi = protocol == "multi_shot"
        return single_shot_half(records, trial=trial, seed=seed, dataset_root=campus,
                                n_test_ids=test_ids, all_probe_images=multi,
                                all_gallery_images=multi, name="cuhk01", protocol=protocol)
    if protocol == "warca":
        return warca_protocol(records, trial=trial, seed=seed, dataset_root=campus,
                              test_ids=test_ids, draws=draws, warca_draw=warca_draw,
                              name="cuhk01")
    raise UsageError(f"cuhk01 protocol {protocol!r} is unknown",
                     "use protocol=single_shot, multi_shot or warca")


register(INFO, load_cuhk01, lambda p: (p / "campus").is_dir() or (p / "CUHK01.zip").is_file())
