"""PRID450S (docs/datasets.md): ``cam_a/`` and ``cam_b/`` with ``img_NNNN.png`` (same number =
same person, pid = NNNN); every other file in the folders (the segmentation masks, whose names
are unconfirmed) is ignored.

Protocols (10 seeded trials, eval E3 = rule ``market``): ``half`` (default; C-DPCF) —
``test_ids`` (225) random test persons, probe = their cam_a image, gallery = their cam_b image,
the other 225 train with both images; ``warca`` (docs/datasets.md) — P = ``test_ids`` per split,
``draws`` draws per split, ``warca_draw`` = ``probe_single`` (default) | ``gallery_single``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.trials import (Pool, check_choice, check_int, check_seed, check_test_ids,
                                 load_warca, require_pairs, two_view_trials)
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir

NAME = re.compile(r"^img_(\d{4})\.png$")
VIEWS = {"cam_a": 0, "cam_b": 1}
PROTOCOLS = ("half", "warca")
TEST_IDS = 225

INFO = DatasetInfo(
    name="prid450s", title="PRID 450S",
    url="https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/prid450s/ "
        "(third-party loaders use https://files.icg.tugraz.at/f/8c709245bb/?raw=1)",
    license="research use (terms on the TU Graz page, treated as research-only); "
            "reidcli never downloads it",
    tree="prid450s/   (or PRID450S/, prid450s/PRID450S/)\n"
         "  cam_a/  img_0001.png .. img_0450.png (+ segmentation masks, ignored)\n"
         "  cam_b/  img_0001.png .. img_0450.png (+ masks; same number = same person)",
    candidates=("prid450s/PRID450S", "prid450s", "PRID450S", "."),
    cameras="2",
    counts={"train": (450, 225), "query": (225, 225), "gallery": (225, 225)},
    options={"protocol": "half", "seed": 0, "test_ids": TEST_IDS, "draws": 10,
             "warca_draw": "probe_single", "same_camera": "drop"},
    protocol="half (10 seeded trials: 225 train / 225 test ids; probe cam_a, gallery cam_b)",
    notes=("only files named img_NNNN.png are read; pid = NNNN",
           "protocol=warca: test_ids (P=225) per split, draws per split (trial t = split "
           "t // draws, draw t % draws), warca_draw=probe_single|gallery_single, "
           "same_camera=drop|keep",
           "test_ids=N scales the test set (e.g. for a partial copy)"),
    unconfirmed=("names of the mask files — any file not named img_NNNN.png is ignored "
                 "(docs/datasets.md)",
                 "official archive URL (docs/datasets.md)",
                 "exact licence text of the PRID450S page (treated as research-only)"))


def looks_like_prid450s(path: Path) -> bool:
    """Both view folders, with at least one ``img_NNNN.png`` in ``cam_a/``."""
    a, b = path / "cam_a", path / "cam_b"
    return a.is_dir() and b.is_dir() and any(NAME.match(p.name) for p in a.iterdir())


def read_prid450s(folder: Path) -> pd.DataFrame:
    """The ``img_NNNN.png`` images of both views as one record table sorted by path."""
    rows = []
    for view, camid in VIEWS.items():
        rows += scan_folder(folder / view, NAME, "prid450s", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)), "camid": c}, strict=False)
    return rows_to_frame(rows, "prid450s")


def load_prid450s(root=None, trial: int = 0, protocol: str = "half", seed: int = 0,
                  test_ids: int = TEST_IDS, draws: int = 10,
                  warca_draw: str = "probe_single", same_camera: str = "drop") -> DatasetSplit:
    """Load PRID450S trial ``trial`` of ``protocol`` (``half`` 0..9, ``warca`` 0..10·draws−1)."""
    protocol = check_choice("prid450s", "protocol", protocol, PROTOCOLS)
    seed = check_seed("prid450s", seed)
    test_ids = check_int("prid450s", "test_ids", test_ids)
    folder = resolve_dataset_dir("prid450s", root)
    pool = Pool.of("prid450s", folder, read_prid450s(folder))
    require_pairs(pool, VIEWS)
    options = {"protocol": protocol, "seed": seed, "test_ids": test_ids}
    if protocol == "warca":
        return load_warca(pool, trial, seed=seed, test_ids=test_ids, draws=draws,
                          warca_draw=warca_draw, same_camera=same_camera,
                          options=options)
    eligible = pool.ids_in_views(0, 1)
    check_test_ids(pool, protocol, test_ids, eligible, "persons")
    trials = pool.cached(f"prid450s_half_p{test_ids}_seed{seed}",
                         lambda: two_view_trials(pool, test_ids=test_ids, seed=seed,
                                                 eligible=eligible))
    return pool.split(trials, trial, protocol=protocol, options=options)


register(INFO, load_prid450s, looks_like_prid450s)
