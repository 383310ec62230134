"""SYSU-MM01 (docs/datasets.md, evaluation rule E4 ``sysu``).

Tree: ``cam1/``..``cam6/`` each with ``PPPP/NNNN.jpg`` (a person folder only where that camera
saw the person) and ``exp/{available,train,val,test}_id.txt`` (one comma line of ids).
Cameras 3 and 6 are infrared, 1, 2, 4, 5 visible. Records: ``camid = cam − 1``,
``frame = NNNN``, ``modality`` per camera, ``x_location`` = E4's location of the camera
(cams 2 and 3 share a room) — the evaluation derives the same locations from ``camid``.

Protocol: train = every image of the train ids (+ val ids by default), all six cameras;
query = every IR image (cams 3, 6) of the test ids, in both modes; gallery of trial t (0..9)
= for each test id and gallery camera (all-search 1, 2, 4, 5; indoor-search 1, 2) ``shots``
images drawn with a seeded generator (fewer when fewer exist). The draws are reidcli's own —
not the official ``rand_perm_cam.mat`` permutations nor AGW's ``random.seed(trial)`` — and are
cached as JSON next to the data, so report them with the results.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reidcli.data.datasets.common import require_dir, require_file, rows_to_frame
from reidcli.data.datasets.market_folder import list_images
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import (Trial, cached_trials, protocol_rng, relative_paths,
                                 split_from_trial)
from reidcli.errors import DatasetError, UsageError

IMAGE = re.compile(r"^(\d+)\.jpg$")
CAMERAS = (1, 2, 3, 4, 5, 6)
IR_CAMERAS = (3, 6)
GALLERY_CAMERAS = {"all": (1, 2, 4, 5), "indoor": (1, 2)}
#: E4 locations of the 1-based cameras (cams 2 and 3 share room 2)
LOCATION = {1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}
ID_FILES = ("train_id.txt", "val_id.txt", "test_id.txt")
NUM_TRIALS = 10

INFO = DatasetInfo(
    name="sysu_mm01", title="SYSU-MM01 (visible-infrared)", aliases=("sysu",),
    url="https://github.com/wuancong/SYSU-MM01 (signed dataset release agreement e-mailed to "
        "wuanc@mail.sysu.edu.cn; the download link is sent on approval)",
    license="signed release agreement required; no redistribution — reidcli never downloads it",
    tree="SYSU-MM01/   (or sysu-mm01/, SYSU-MM01/ori_data/)\n"
         "  cam1/ .. cam6/   PPPP/NNNN.jpg   (cams 3, 6 infrared; 1, 2 indoor, 4, 5 outdoor)\n"
         "  exp/ available_id.txt train_id.txt val_id.txt test_id.txt   (one comma line each; "
         ".mat twins unused)",
    candidates=("SYSU-MM01", "sysu-mm01", "SYSU-MM01/ori_data", "sysu_mm01", "."),
    cameras="6 (4 visible, 2 infrared)",
    counts={"train": (34167, 395), "query": (3803, 96), "gallery": (301, 96)},
    options={"mode": "all", "shots": 1, "train_includes_val": True, "seed": 0},
    protocol="all-search single-shot: query = 3,803 IR images of the 96 test ids, gallery "
             "re-drawn in each of 10 seeded trials",
    eval_rule="sysu",
    notes=("train (default, train + val ids) = 22,258 visible + 11,909 infrared images",
           "mode=indoor uses gallery cams 1, 2; shots=10 is multi-shot",
           "gallery draws are reidcli's seeded ones (cached in reidcli_splits/), not the "
           "official rand_perm_cam.mat or AGW's; say so with the results"),
    unconfirmed=("indoor-search single-shot gallery size (≈112; docs/datasets.md)",))


def looks_like_sysu(path: Path) -> bool:
    return (path / "exp" / "test_id.txt").is_file() and (path / "cam1").is_dir()


def read_ids(path: Path) -> np.ndarray:
    """Sorted ids of an ``exp/*_id.txt`` file (integers separated by commas/whitespace)."""
    text = require_file(path, "sysu_mm01").read_text()
    tokens = [t for t in re.split(r"[,\s]+", text) if t]
    bad = [t for t in tokens if not t.isdigit()]
    if bad or not tokens:
        found = f"found {bad[0]!r}" if bad else "found no id"
        raise DatasetError(f"sysu_mm01: {path} holds something other than integer ids "
                           f"({found}; expected one comma-separated line)",
                           "restore the exp/ files of the release")
    return np.array(sorted({int(t) for t in tokens}), dtype=np.int64)


def read_images(folder: Path, ids: np.ndarray) -> list[dict]:
    """Record rows of every image of ``ids`` in ``cam1``..``cam6``."""
    rows = []
    for cam in CAMERAS:
        cam_dir = require_dir(folder / f"cam{cam}", "sysu_mm01")
        modality = "infrared" if cam in IR_CAMERAS else "visible"
        for pid in ids:
            person = cam_dir / f"{pid:04d}"
            if not person.is_dir():
                continue                          # not every camera sees every person
            for name in list_images(person):
                match = IMAGE.match(name)
                if match is None:
                    raise DatasetError(f"sysu_mm01: malformed image name {person / name}",
                                       "expected NNNN.jpg inside cam<k>/<PPPP>/")
                rows.append({"path": person / name, "pid": int(pid), "camid": cam - 1,
                             "frame": int(match.group(1)), "modality": modality,
                             "x_location": LOCATION[cam]})
    return rows


def read_sysu(folder: Path, train_includes_val: bool = True) -> tuple[
        pd.DataFrame, np.ndarray, np.ndarray]:
    """``(records, train_ids, test_ids)``: every image of the used ids, sorted by path."""
    exp = folder / "exp"
    train, val, test = (read_ids(exp / f) for f in ID_FILES)
    for (a, b), (x, y) in zip(((train, val), (train, test), (val, test)),
                              ((0, 1), (0, 2), (1, 2))):
        both = np.intersect1d(a, b)
        if len(both):
            raise DatasetError(f"sysu_mm01: id {int(both[0])} is in both {exp / ID_FILES[x]} "
                               f"and {exp / ID_FILES[y]}", "restore the exp/ files")
    train_ids = np.union1d(train, val) if train_includes_val else train
    records = rows_to_frame(read_images(folder, np.union1d(train_ids, test)), "sysu_mm01")
    missing = np.setdiff1d(test, records["pid"].to_numpy(np.int64))
    if len(missing):
        raise DatasetError(f"sysu_mm01: test id {int(missing[0])} of {exp / 'test_id.txt'} has "
                           f"no image folder {int(missing[0]):04d}/ in any of "
                           f"{folder}/cam1..cam6", "restore the camera folders")
    return records, train_ids, test


def gallery_draws(rel: np.ndarray, pids: np.ndarray, cams: np.ndarray, test_ids, mode: str,
                  shots: int, seed: int) -> list[list[str]]:
    """The 10 galleries: per trial, test id and gallery camera ``shots`` random images."""
    out = []
    for t in range(NUM_TRIALS):
        rng = protocol_rng(seed, "sysu_mm01", mode, shots, t)
        chosen = []
        for pid in test_ids:
            for cam in GALLERY_CAMERAS[mode]:
                options = np.flatnonzero((pids == pid) & (cams == cam))
                if len(options):
                    take = rng.choice(len(options), size=min(shots, len(options)),
                                      replace=False)
                    chosen.extend(options[np.sort(take)].tolist())
        out.append(rel[np.sort(np.asarray(chosen, dtype=np.int64))].tolist())
    return out


def load_sysu_mm01(root=None, trial: int = 0, mode: str = "all", shots: int = 1,
                   train_includes_val: bool = True, seed: int = 0) -> DatasetSplit:
    """Load one SYSU-MM01 trial (gallery draw ``trial`` of 10)."""
    if mode not in GALLERY_CAMERAS:
        raise UsageError(f"sysu_mm01 option mode={mode!r} is unknown",
                         "use mode=all or mode=indoor")
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise UsageError(f"sysu_mm01 option shots={shots!r}",
                         "use shots=1 (single-shot) or shots=10 (multi-shot)")
    shots, seed, train_includes_val = int(shots), int(seed), bool(train_includes_val)
    folder = resolve_dataset_dir("sysu_mm01", root)
    records, train_ids, test_ids = read_sysu(folder, train_includes_val)
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64) + 1
    is_test = np.isin(pids, test_ids)
    train = rel[np.isin(pids, train_ids)].tolist()
    query = rel[is_test & np.isin(cams, IR_CAMERAS)].tolist()

    def build() -> list[Trial]:
        galleries = gallery_draws(rel, pids, cams, test_ids, mode, shots, seed)
        return [{"train": train, "query": query, "gallery": g} for g in galleries]

    key = f"sysu_{mode}_shots{shots}_val{int(train_includes_val)}_seed{seed}"
    trials = cached_trials(folder, key, build, fingerprint=rel.tolist())
    return split_from_trial("sysu_mm01", records, trials, trial, folder,
                            protocol=f"{mode}_search_{shots}shot",
                            options={"mode": mode, "shots": shots,
                                     "train_includes_val": train_includes_val, "seed": seed},
                            eval_rule="sysu", eval_kwargs={"mode": mode, "shots": shots})


register(INFO, load_sysu_mm01, looks_like_sysu)
