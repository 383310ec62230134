"""GRID (QMUL underground re-id, datasets.md §5.8): ``probe/*.jpeg`` (250) and
``gallery/*.jpeg`` (1,025 incl. 775 ``0000_*`` distractors) plus the official 10 partitions in
``features_and_partitions.mat``. The folders are the two views (probe camid 0, gallery 1)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from reidcli.data.datasets.common import require_file, rows_to_frame, scan_folder
from reidcli.data.protocols import single_shot_half
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import cached_trials, relative_paths, split_from_trial
from reidcli.errors import DatasetError, UsageError

NAME = re.compile(r"^(\d{4})_([1-8])_.*\.jpeg$")
PARTITIONS = "features_and_partitions.mat"

INFO = DatasetInfo(
    name="grid", title="GRID (QMUL underground re-id)",
    url="http://personal.ie.cuhk.edu.hk/~ccloy/files/datasets/underground_reid.zip "
        "(page http://personal.ie.cuhk.edu.hk/~ccloy/downloads_qmul_underground_reid.html)",
    license="research use (terms on the download page); reidcli never downloads it",
    tree="underground_reid/\n  probe/    PPPP_C_*.jpeg (250)\n"
         "  gallery/  PPPP_C_*.jpeg (1,025 incl. 775 0000_* distractors)\n"
         "  features_and_partitions.mat  (trainIdxAll: 10 official partitions)",
    candidates=("grid/underground_reid", "underground_reid", "grid", "."),
    cameras="2 views (8 physical)",
    counts={"train": (250, 125), "query": (125, 125), "gallery": (900, 126)},
    options={"protocol": "official_mat", "seed": 0, "expected_train_ids": 125},
    protocol="official_mat (the 10 partitions of features_and_partitions.mat; gallery keeps "
             "all 775 distractors)",
    notes=("camid = folder view (probe 0, gallery 1); x_physical_cam = camera token − 1",),
    unconfirmed=("meaning of the name tokens after the camera",
                 "struct field names in features_and_partitions.mat (the 3rd field is read)"))


def official_partitions(path: Path, expected: int) -> list[np.ndarray]:
    """Training person indices of the 10 official partitions (third struct field)."""
    import scipy.io

    require_file(path, "grid")
    try:
        mat = scipy.io.loadmat(path)
        cells = mat["trainIdxAll"]
        parts = [np.asarray(cells[0][k][0][0][2]).ravel().astype(np.int64)
                 for k in range(cells.shape[1])]
    except KeyError:
        raise DatasetError(f"grid: {path} has no variable trainIdxAll",
                           "use the features_and_partitions.mat of the GRID release") from None
    except (IndexError, TypeError, ValueError) as exc:
        raise DatasetError(f"grid: trainIdxAll in {path} is not a cell of structs whose third "
                           f"field holds the training ids ({exc})",
                           "use the features_and_partitions.mat of the GRID release") from None
    bad = [k for k, p in enumerate(parts) if len(p) != expected]
    if len(parts) != 10 or bad:
        raise DatasetError(f"grid: {path} holds {len(parts)} partitions with "
                           f"{[len(p) for p in parts]} ids; expected 10 × {expected}",
                           "use the features_and_partitions.mat of the GRID release")
    return parts


def load_grid(root=None, trial: int = 0, protocol: str = "official_mat", seed: int = 0,
              expected_train_ids: int = 125):
    """Load one GRID trial."""
    folder = resolve_dataset_dir("grid", root)
    rows = []
    for view, camid in (("probe", 0), ("gallery", 1)):
        rows += scan_folder(folder / view, NAME, "grid", lambda m, p, c=camid: {
            "path": p, "pid": int(m.group(1)), "camid": c,
            "x_physical_cam": int(m.group(2)) - 1})
    records = rows_to_frame(rows, "grid")
    if protocol == "random":
        persons = records.loc[records["pid"] > 0, "pid"].nunique()
        return single_shot_half(records, trial=trial, seed=seed, dataset_root=folder,
                                n_test_ids=persons - expected_train_ids, name="grid",
                                protocol="random")
    if protocol != "official_mat":
        raise UsageError(f"grid protocol {protocol!r} is unknown",
                         "use protocol=official_mat or random")
    parts = official_partitions(folder / PARTITIONS, expected_train_ids)
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64)

    def build():
        trials = []
        for train_ids in parts:
            is_train = np.isin(pids, train_ids)
            test = (pids > 0) & ~is_train
            trials.append({"train": rel[is_train].tolist(),
                           "query": rel[test & (cams == 0)].tolist(),
                           "gallery": rel[(test | (pids == 0)) & (cams == 1)].tolist()})
        return trials

    trials = cached_trials(folder, "official_mat", build,
                           fingerprint=sorted(rel.tolist()) + [str(p.tolist()) for p in parts])
    return split_from_trial("grid", records, trials, trial, folder, protocol="official_mat",
                            options={"protocol": "official_mat"})


register(INFO, load_grid, lambda p: (p / "probe").is_dir() and (p / "gallery").is_dir())
