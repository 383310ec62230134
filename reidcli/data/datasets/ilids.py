"""QMUL iLIDS, single-shot (docs/datasets.md): ``Persons/PPPPNNN.jpg`` — pid = PPPP, image
number NNN (``frame``). The release has no camera labels: ``camid = NNN − 1`` is a pseudo
camera (torchreid's convention, ``x_pseudo_cam = True``) that only guarantees that a probe
and a gallery image of one person differ.

Protocols (10 seeded trials, eval E3 = rule ``market``; only persons with ≥ 2 images are ever
test persons):

* ``dg`` (default; DIMN, DualNorm, DMG-Net test): per trial ``test_ids`` (60) random persons;
  for each, 2 random distinct images: the probe and the gallery entry. No training images
  (DG test only).
* ``warca`` (docs/datasets.md): P = ``test_ids`` (60) per split, every other person trains;
  ``draws`` draws per split, ``warca_draw`` = ``probe_single`` (default) | ``gallery_single``.

Not iLIDS-VID (the video dataset, out of scope).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reidcli.data.datasets.common import rows_to_frame, scan_folder
from reidcli.data.trials import (NUM_SPLITS, Pool, check_choice, check_int, check_seed,
                                 check_test_ids, load_warca)
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import Trial, choose_ids, protocol_rng
from reidcli.errors import DatasetError

NAME = re.compile(r"^(\d{4})(\d{3})\.jpg$")
PROTOCOLS = ("dg", "warca")
TEST_IDS = 60

INFO = DatasetInfo(
    name="ilids", title="QMUL iLIDS (i-LIDS MCTS, single-shot)", aliases=("qmul_ilids",),
    url="http://www.eecs.qmul.ac.uk/~jason/data/i-LIDS_Pedestrian.tgz",
    license="research use (terms of the QMUL i-LIDS release, treated as research-only); "
            "reidcli never downloads it",
    tree="ilids/i-LIDS_Pedestrian/Persons/   (or i-LIDS_Pedestrian/Persons/)\n"
         "  PPPPNNN.jpg (476 images, 119 persons, 2-8 images each; PPPP person, NNN image)",
    candidates=("ilids/i-LIDS_Pedestrian/Persons", "i-LIDS_Pedestrian/Persons",
                "ilids/Persons", "Persons", "ilids", "."),
    cameras="pseudo",
    counts={"query": (60, 60), "gallery": (60, 60)},
    options={"protocol": "dg", "seed": 0, "test_ids": TEST_IDS, "draws": 10,
             "warca_draw": "probe_single", "same_camera": "drop"},
    protocol="dg (10 seeded trials: 60 random persons, 2 random images each → probe and "
             "gallery; no training images)",
    notes=("no camera labels: camid = image number − 1 (pseudo camera, x_pseudo_cam)",
           "protocol=warca: test_ids (P=60) per split, the other persons train; draws per "
           "split (trial t = split t // draws, draw t % draws), "
           "warca_draw=probe_single|gallery_single, same_camera=drop|keep",
           "persons with one image are never test persons",
           "not iLIDS-VID (video, out of scope)",
           "test_ids=N scales the test set (e.g. for a partial copy)"),
    unconfirmed=("exact licence text of the QMUL iLIDS page (treated as research-only; "
                 "docs/datasets.md)",))


def looks_like_ilids(path: Path) -> bool:
    """A folder of ``.jpg`` files, at least one named like ``PPPPNNN.jpg``."""
    return any(NAME.match(c.name) for c in path.iterdir())


def read_ilids(folder: Path) -> pd.DataFrame:
    """All ``PPPPNNN.jpg`` images of the folder as one record table sorted by path."""
    records = rows_to_frame(scan_folder(folder, NAME, "ilids", lambda m, p: {
        "path": p, "pid": int(m.group(1)), "camid": int(m.group(2)) - 1,
        "frame": int(m.group(2)), "x_pseudo_cam": True}), "ilids")
    bad = records[(records["pid"] == 0) | (records["camid"] < 0)]
    if len(bad):
        raise DatasetError(f"ilids: malformed image name {bad['path'].iloc[0]}",
                           "persons and images are numbered from 1 (PPPP ≥ 0001, NNN ≥ 001)")
    return records


def dg_trials(pool: Pool, *, test_ids: int, seed: int, eligible: np.ndarray,
              num_trials: int = NUM_SPLITS) -> list[Trial]:
    """Per trial ``t``: ``test_ids`` of ``eligible`` (stream ``(ilids, "split", t)``, the one
    WARCA splits use too), then per test person in ascending order two distinct random images
    of its sorted images (stream ``(ilids, "dg", t)``): probe, gallery."""
    trials = []
    for t in range(num_trials):
        test, _ = choose_ids(eligible, test_ids, protocol_rng(seed, pool.dataset, "split", t))
        rng = protocol_rng(seed, pool.dataset, "dg", t)
        probe, gallery = [], []
        for pid in test:
            first, second = rng.choice(np.flatnonzero(pool.pids == pid), size=2, replace=False)
            probe.append(pool.rel[first])
            gallery.append(pool.rel[second])
        trials.append({"train": [], "query": sorted(probe), "gallery": sorted(gallery)})
    return trials


def load_ilids(root=None, trial: int = 0, protocol: str = "dg", seed: int = 0,
               test_ids: int = TEST_IDS, draws: int = 10,
               warca_draw: str = "probe_single", same_camera: str = "drop") -> DatasetSplit:
    """Load iLIDS trial ``trial`` of ``protocol`` (``dg`` 0..9, ``warca`` 0..10·draws−1)."""
    protocol = check_choice("ilids", "protocol", protocol, PROTOCOLS)
    seed = check_seed("ilids", seed)
    test_ids = check_int("ilids", "test_ids", test_ids)
    folder = resolve_dataset_dir("ilids", root)
    pool = Pool.of("ilids", folder, read_ilids(folder))
    options = {"protocol": protocol, "seed": seed, "test_ids": test_ids}
    if protocol == "warca":
        return load_warca(pool, trial, seed=seed, test_ids=test_ids, draws=draws,
                          warca_draw=warca_draw, same_camera=same_camera,
                          options=options)
    eligible = pool.ids_with_images(2)
    check_test_ids(pool, protocol, test_ids, eligible, "persons with ≥ 2 images")
    trials = pool.cached(f"ilids_dg_p{test_ids}_seed{seed}",
                         lambda: dg_trials(pool, test_ids=test_ids, seed=seed,
                                           eligible=eligible))
    return pool.split(trials, trial, protocol=protocol, options=options)


register(INFO, load_ilids, looks_like_ilids)
