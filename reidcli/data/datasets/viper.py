"""VIPeR (docs/datasets.md): ``cam_a/`` and ``cam_b/`` with ``NNN_A.bmp`` (pair index NNN,
viewpoint angle A); the same NNN in both folders is the same person.

The pair index starts at ``000`` while pid 0 means "distractor" everywhere in reidcli (§1;
E1 skips pid-0 queries, training drops pid ≤ 0), so records carry ``pid = NNN + 1`` and the
file's own number in ``x_native_pid``; ``x_angle`` = A.

Protocols (10 seeded trials, eval E3 = rule ``market``):

* ``half`` (default; C-DPCF, torchreid, DG test): ``test_ids`` (316) random persons are test,
  the other 316 train with both images; probe = the cam_a images of the test persons, gallery
  = their cam_b images; ``probe_cam=b`` swaps the views (same persons per trial — torchreid's
  splits 10-19).
* ``warca`` (docs/datasets.md): P = ``test_ids`` test persons per split, the rest train;
  ``draws`` (10) probe/gallery draws per split, ``warca_draw`` = ``probe_single`` (default) |
  ``gallery_single``, ``same_camera`` = ``drop`` | ``keep``.
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

NAME = re.compile(r"^(\d{3})_(\d+)\.bmp$")
VIEWS = {"cam_a": 0, "cam_b": 1}
PROTOCOLS = ("half", "warca")
TEST_IDS = 316

INFO = DatasetInfo(
    name="viper", title="VIPeR (Viewpoint Invariant Pedestrian Recognition)",
    url="http://users.soe.ucsc.edu/~manduchi/VIPeR.v1.0.zip "
        "(page https://vision.soe.ucsc.edu/node/178)",
    license="research use (terms on the project page, treated as research-only); "
            "reidcli never downloads it",
    tree="viper/VIPeR/   (or VIPeR/, VIPeR.v1.0/)\n"
         "  cam_a/  NNN_A.bmp (632; NNN = pair index, A = view angle; 48×128)\n"
         "  cam_b/  NNN_A.bmp (632; same NNN = same person)",
    candidates=("viper/VIPeR", "VIPeR", "VIPeR.v1.0", "viper/VIPeR.v1.0", "viper", "."),
    cameras="2",
    counts={"train": (632, 316), "query": (316, 316), "gallery": (316, 316)},
    options={"protocol": "half", "probe_cam": "a", "seed": 0, "test_ids": TEST_IDS,
             "draws": 10, "warca_draw": "probe_single", "same_camera": "drop"},
    protocol="half (10 seeded trials: 316 train / 316 test ids; probe cam_a, gallery cam_b)",
    notes=("pid = pair index NNN + 1 (pid 0 means distractor); x_native_pid keeps NNN, "
           "x_angle the view angle",
           "probe_cam=b swaps the views with the same test persons per trial",
           "protocol=warca: test_ids (P=316) per split, draws per split (trial t = split "
           "t // draws, draw t % draws), warca_draw=probe_single|gallery_single, "
           "same_camera=drop|keep",
           "test_ids=N scales the test set (e.g. for a partial copy)"),
    unconfirmed=("exact licence text of the VIPeR page (treated as research-only; "
                 "docs/datasets.md)",))


def looks_like_viper(path: Path) -> bool:
    """Both view folders, with ``.bmp`` files in ``cam_a/``."""
    a, b = path / "cam_a", path / "cam_b"
    return a.is_dir() and b.is_dir() and any(p.suffix.lower() == ".bmp" for p in a.iterdir())


def read_viper(folder: Path) -> pd.DataFrame:
    """All images of ``cam_a/`` and ``cam_b/`` as one record table sorted by path."""
    rows = []
    for view, camid in VIEWS.items():
        rows += scan_folder(folder / view, NAME, "viper", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)) + 1, "camid": c,
            "x_native_pid": int(m.group(1)), "x_angle": int(m.group(2))})
    return rows_to_frame(rows, "viper")


def load_viper(root=None, trial: int = 0, protocol: str = "half", probe_cam: str = "a",
               seed: int = 0, test_ids: int = TEST_IDS, draws: int = 10,
               warca_draw: str = "probe_single", same_camera: str = "drop") -> DatasetSplit:
    """Load VIPeR trial ``trial`` of ``protocol`` (``half`` 0..9, ``warca`` 0..10·draws−1)."""
    protocol = check_choice("viper", "protocol", protocol, PROTOCOLS)
    probe_cam = check_choice("viper", "probe_cam", probe_cam, ("a", "b"))
    seed = check_seed("viper", seed)
    test_ids = check_int("viper", "test_ids", test_ids)
    folder = resolve_dataset_dir("viper", root)
    pool = Pool.of("viper", folder, read_viper(folder))
    require_pairs(pool, VIEWS)
    options = {"protocol": protocol, "probe_cam": probe_cam, "seed": seed,
               "test_ids": test_ids}
    if protocol == "warca":
        return load_warca(pool, trial, seed=seed, test_ids=test_ids, draws=draws,
                          warca_draw=warca_draw, same_camera=same_camera,
                          options=options)
    eligible = pool.ids_in_views(0, 1)
    check_test_ids(pool, protocol, test_ids, eligible, "persons")
    probe, gallery = (0, 1) if probe_cam == "a" else (1, 0)
    trials = pool.cached(f"viper_half_probe{probe_cam}_p{test_ids}_seed{seed}",
                         lambda: two_view_trials(pool, test_ids=test_ids, seed=seed,
                                                 eligible=eligible, probe_view=probe,
                                                 gallery_view=gallery))
    return pool.split(trials, trial, protocol=protocol, options=options)


register(INFO, load_viper, looks_like_viper)
