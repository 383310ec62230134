"""GRID (QMUL underground re-id, docs/datasets.md).

Tree: ``probe/*.jpeg`` (250) and ``gallery/*.jpeg`` (1,025 incl. 775 ``0000_*`` images of
people never seen in ``probe/``) plus the official 10 partitions in
``features_and_partitions.mat``. The two folders are the two views (probe camid 0, gallery
camid 1); the name's second token is the physical camera 1..8 (``x_physical_cam`` = token − 1).
``pid`` 0 = distractor: every ``0000`` image is in every trial's gallery (E3 keeps it as a
negative).

Protocols (10 trials each): ``official_mat`` — trial k trains on the 125 person indices of
``trainIdxAll{k}`` (the struct's third field, read by position because the field names are
unconfirmed); ``random`` — the same sizes drawn from a seeded permutation of the 250 persons
(DualNorm style), cached as JSON next to the data.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reidcli.data.datasets.common import require_file, rows_to_frame, scan_folder
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import (Trial, cached_trials, choose_ids, protocol_rng,
                                 relative_paths, split_from_trial)
from reidcli.data.trials import check_choice
from reidcli.errors import DatasetError

NAME = re.compile(r"^(\d{4})_([1-8])_.*\.jpeg$")
VIEWS = {"probe": 0, "gallery": 1}
PARTITIONS = "features_and_partitions.mat"
NUM_TRIALS = 10
PROTOCOLS = ("official_mat", "random")
#: persons of the official partitions' training halves (the fake trees use fewer)
TRAIN_IDS = 125

INFO = DatasetInfo(
    name="grid", title="GRID (QMUL underground re-id)",
    url="http://personal.ie.cuhk.edu.hk/~ccloy/files/datasets/underground_reid.zip "
        "(page http://personal.ie.cuhk.edu.hk/~ccloy/downloads_qmul_underground_reid.html)",
    license="research use (terms on the download page, treated as research-only); "
            "reidcli never downloads it",
    tree="grid/underground_reid/   (or underground_reid/)\n"
         "  probe/    PPPP_C_*.jpeg (250; PPPP = person 0001..0250, C = camera 1..8)\n"
         "  gallery/  PPPP_C_*.jpeg (1,025 incl. 775 0000_* distractors)\n"
         "  features_and_partitions.mat  (trainIdxAll: 1×10 cell of structs, 3rd field = "
         "125 training person indices)",
    candidates=("grid/underground_reid", "underground_reid", "grid", "."),
    cameras="2 views (8 physical)",
    counts={"train": (250, 125), "query": (125, 125), "gallery": (900, 126)},
    options={"protocol": "official_mat", "seed": 0, "expected_train_ids": TRAIN_IDS},
    protocol="official_mat (the 10 partitions of features_and_partitions.mat; probe = probe/ "
             "images of the 125 test persons, gallery = their gallery/ images + all 775 "
             "distractors)",
    notes=("camid = folder view (probe 0, gallery 1); x_physical_cam = camera token − 1",
           "pid 0 (0000_*) = distractors, always in the test gallery",
           "protocol=random draws the same sizes (125/125) from a seeded permutation; "
           "expected_train_ids changes the training size (for scaled-down copies)"),
    unconfirmed=("meaning of the GRID name tokens after the camera (docs/datasets.md)",
                 "struct field names in features_and_partitions.mat — the 3rd field is read "
                 "by position (docs/datasets.md)",
                 "licence text of the GRID page (treated as research-only)"))


def looks_like_grid(path: Path) -> bool:
    return (path / "probe").is_dir() and (path / "gallery").is_dir()


def read_grid(folder: Path) -> pd.DataFrame:
    """All images of ``probe/`` and ``gallery/`` as one record table sorted by path."""
    rows = []
    for view, camid in VIEWS.items():
        rows += scan_folder(folder / view, NAME, "grid", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)), "camid": c,
            "x_physical_cam": int(m.group(2)) - 1})
    records = rows_to_frame(rows, "grid")
    probe_zero = records[(records["pid"] == 0) & (records["camid"] == 0)]
    if len(probe_zero):
        raise DatasetError(f"grid: distractor image {probe_zero['path'].iloc[0]} is in probe/",
                           "0000_* files belong to gallery/; restore the GRID release")
    return records


def official_partitions(path: Path, expected: int = TRAIN_IDS) -> list[np.ndarray]:
    """Training person indices of the 10 official partitions (third struct field).

    ``m['trainIdxAll'][0][k][0][0][2][0]`` with ``scipy.io.loadmat`` defaults; every
    partition must hold ``expected`` distinct ids.
    """
    import scipy.io

    require_file(path, "grid")
    todo = "use the features_and_partitions.mat of the GRID release"
    try:
        mat = scipy.io.loadmat(path)
    except Exception as exc:                       # scipy raises several types on bad files
        raise DatasetError(f"grid: cannot read {path} as a MATLAB v5 file ({exc})",
                           todo) from None
    if "trainIdxAll" not in mat:
        have = ", ".join(k for k in mat if not k.startswith("__")) or "none"
        raise DatasetError(f"grid: {path} has no variable trainIdxAll (has: {have})", todo)
    cells = mat["trainIdxAll"]
    try:
        parts = [np.asarray(cells[0][k][0][0][2]).ravel() for k in range(cells.shape[1])]
        parts = [p.astype(np.int64) if np.all(p == np.round(p)) else None for p in parts]
    except (IndexError, TypeError, ValueError, KeyError) as exc:
        raise DatasetError(f"grid: trainIdxAll in {path} is not a 1×10 cell of structs whose "
                           f"third field holds the training person indices ({exc})",
                           todo) from None
    if any(p is None for p in parts):
        raise DatasetError(f"grid: trainIdxAll in {path} holds non-integer person indices",
                           todo)
    sizes = [len(np.unique(p)) for p in parts]
    if cells.shape[0] != 1 or len(parts) != NUM_TRIALS or any(
            s != expected or len(p) != expected for s, p in zip(sizes, parts)):
        raise DatasetError(f"grid: trainIdxAll in {path} holds {len(parts)} partitions with "
                           f"{sizes} distinct ids; expected {NUM_TRIALS} × {expected}",
                           todo + " (scaled-down copies: pass expected_train_ids=N)")
    return [np.sort(p) for p in parts]


def _trial(rel: np.ndarray, pids: np.ndarray, cams: np.ndarray, train_ids) -> Trial:
    """Train = both views of ``train_ids``; probe = probe/ of the other persons; gallery =
    their gallery/ images plus every distractor."""
    is_train = np.isin(pids, train_ids)
    test = (pids > 0) & ~is_train
    return {"train": rel[is_train].tolist(),
            "query": rel[test & (cams == VIEWS["probe"])].tolist(),
            "gallery": rel[(test | (pids == 0)) & (cams == VIEWS["gallery"])].tolist()}


def load_grid(root=None, trial: int = 0, protocol: str = "official_mat", seed: int = 0,
              expected_train_ids: int = TRAIN_IDS) -> DatasetSplit:
    """Load GRID trial ``trial`` (0..9) of ``protocol`` (``official_mat`` | ``random``)."""
    protocol = check_choice("grid", "protocol", protocol, PROTOCOLS)
    expected_train_ids = int(expected_train_ids)
    folder = resolve_dataset_dir("grid", root)
    records = read_grid(folder)
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64)
    persons = np.unique(pids[pids > 0])
    options = {"protocol": protocol, "seed": seed, "expected_train_ids": expected_train_ids}

    if protocol == "official_mat":
        mat = folder / PARTITIONS
        parts = official_partitions(mat, expected_train_ids)
        for k, part in enumerate(parts):
            unknown = np.setdiff1d(part, persons)
            if len(unknown):
                raise DatasetError(f"grid: partition {k + 1} of {mat} lists person "
                                   f"{int(unknown[0]):04d}, which has no image in probe/ or "
                                   "gallery/", "restore the GRID release")
        trials = [_trial(rel, pids, cams, part) for part in parts]
    else:
        if not 1 <= expected_train_ids < len(persons):
            raise DatasetError(f"grid: cannot draw {expected_train_ids} training persons out "
                               f"of the {len(persons)} of {folder}",
                               "check the copy or pass expected_train_ids=N")

        def build() -> list[Trial]:
            out = []
            for t in range(NUM_TRIALS):
                train_ids, _ = choose_ids(persons, expected_train_ids,
                                          protocol_rng(seed, "grid", "random", t))
                out.append(_trial(rel, pids, cams, train_ids))
            return out

        trials = cached_trials(folder, f"grid_random_n{expected_train_ids}_seed{seed}", build,
                               fingerprint=rel.tolist())
    return split_from_trial("grid", records, trials, trial, folder, protocol=protocol,
                            options=options, eval_rule="market")


register(INFO, load_grid, looks_like_grid)
