"""SYSU-MM01 (datasets.md §5.11, eval E4): ``cam1..cam6/PPPP/NNNN.jpg`` and ``exp/*_id.txt``.

Cameras 3 and 6 are infrared. Queries are every IR image of the test ids; each of the 10
trials samples the visible gallery afresh (``shots`` images per id and gallery camera) with a
seeded generator — which differs from the official MATLAB permutations and AGW's sampling.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from reidcli.data.datasets.common import require_dir, require_file, rows_to_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import (cached_trials, protocol_rng, relative_paths,
                                 split_from_trial)
from reidcli.errors import DatasetError, UsageError

IMAGE = re.compile(r"^(\d+)\.jpg$")
IR_CAMERAS = (3, 6)
GALLERY_CAMERAS = {"all": (1, 2, 4, 5), "indoor": (1, 2)}
LOCATION = {1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}
NUM_TRIALS = 10

INFO = DatasetInfo(
    name="sysu_mm01", title="SYSU-MM01 (visible-infrared)", aliases=("sysu",),
    url="https://github.com/wuancong/SYSU-MM01 (signed dataset release agreement e-mailed to "
        "wuanc@mail.sysu.edu.cn)",
    license="signed release agreement required; no redistribution — reidcli never downloads it",
    tree="SYSU-MM01/\n  cam1/ .. cam6/   PPPP/NNNN.jpg  (cams 3, 6 infrared)\n"
         "  exp/ available_id.txt train_id.txt val_id.txt test_id.txt  (one comma line)",
    candidates=("SYSU-MM01", "sysu-mm01", "SYSU-MM01/ori_data", "sysu_mm01", "."),
    cameras="6 (2 IR)",
    counts={"train": (34167, 395), "query": (3803, 96), "gallery": (301, 96)},
    options={"mode": "all", "shots": 1, "train_includes_val": True, "seed": 0},
    protocol="all-search single-shot, 10 seeded gallery samplings",
    eval_rule="sysu",
    notes=("gallery sampling is seeded by reidcli (not the official rand_perm_cam.mat); report "
           "it with the results",),
    unconfirmed=("indoor-search single-shot gallery size (≈112)",))


def read_ids(path: Path) -> np.ndarray:
    """Ids of an ``exp/*_id.txt`` file (comma/whitespace separated integers)."""
    text = require_file(path, "sysu_mm01").read_text()
    tokens = [t for t in re.split(r"[,\s]+", text) if t]
    if not all(t.isdigit() for t in tokens):
        raise DatasetError(f"sysu_mm01: {path} holds something other than integer ids",
                           "restore the exp/ files of the release")
    return np.array(sorted(int(t) for t in tokens), dtype=np.int64)


def _images(folder: Path, ids: np.ndarray) -> list[dict]:
    rows = []
    for cam in range(1, 7):
        cam_dir = require_dir(folder / f"cam{cam}", "sysu_mm01")
        for pid in ids:
            person = cam_dir / f"{pid:04d}"
            if not person.is_dir():
                continue                          # not every camera sees every person
            for name in sorted(p.name for p in person.iterdir()):
                match = IMAGE.match(name)
                if match is None:
                    raise DatasetError(f"sysu_mm01: malformed image name {person / name}",
                                       "expected NNNN.jpg")
                rows.append({"path": person / name, "pid": int(pid), "camid": cam - 1,
                             "frame": int(match.group(1)),
                             "modality": "infrared" if cam in IR_CAMERAS else "visible",
                             "x_location": LOCATION[cam]})
    return rows


def load_sysu_mm01(root=None, trial: int = 0, mode: str = "all", shots: int = 1,
                   train_includes_val: bool = True, seed: int = 0):
    """Load one SYSU-MM01 trial (gallery sampling ``trial`` of 10)."""
    if mode not in GALLERY_CAMERAS:
        raise UsageError(f"sysu_mm01 option mode={mode!r}", "use mode=all or indoor")
    if shots < 1:
        raise UsageError(f"sysu_mm01 option shots={shots}", "use shots=1 or 10")
    folder = resolve_dataset_dir("sysu_mm01", root)
    exp = folder / "exp"
    train_ids = read_ids(exp / "train_id.txt")
    if train_includes_val:
        train_ids = np.union1d(train_ids, read_ids(exp / "val_id.txt"))
    test_ids = read_ids(exp / "test_id.txt")
    rows = [{**r, "split": "train"} for r in _images(folder, train_ids)]
    rows += _images(folder, test_ids)
    records = rows_to_frame(rows, "sysu_mm01")
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64) + 1
    is_test = np.isin(pids, test_ids)
    query = rel[is_test & np.isin(cams, IR_CAMERAS)].tolist()
    train = rel[np.isin(pids, train_ids)].tolist()

    def build():
        trials = []
        for t in range(NUM_TRIALS):
            rng = protocol_rng(seed, "sysu", mode, shots, t)
            gallery = []
            for pid in test_ids:
                for cam in GALLERY_CAMERAS[mode]:
                    options = np.flatnonzero(is_test & (pids == pid) & (cams == cam))
                    if len(options):
                        take = rng.permutation(len(options))[:shots]
                        gallery.extend(rel[options[np.sort(take)]].tolist())
            trials.append({"train": train, "query": query, "gallery": sorted(gallery)})
        return trials

    trials = cached_trials(folder, f"sysu_{mode}_shots{shots}_seed{seed}", build,
                           fingerprint=sorted(rel.tolist()))
    return split_from_trial("sysu_mm01", records, trials, trial, folder,
                            protocol=f"{mode}-search {shots}-shot",
                            options={"mode": mode, "shots": shots, "seed": seed,
                                     "train_includes_val": train_includes_val},
                            eval_rule="sysu", eval_kwargs={"mode": mode, "shots": shots})


register(INFO, load_sysu_mm01, lambda p: (p / "exp" / "test_id.txt").is_file() and
         (p / "cam1").is_dir())
