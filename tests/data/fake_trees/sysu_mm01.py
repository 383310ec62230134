"""Fake SYSU-MM01 tree (docs/datasets.md): ``cam1..cam6/PPPP/NNNN.jpg`` (cams 3 and 6 as
single-channel IR images) and ``exp/*_id.txt`` (one comma line each, plus ``.mat`` twins).

Ids: train 1, 2; val 3; test 4..7 spread over all six cameras (7 is never seen indoors)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io

from tests.data.fake_trees import write_image

TRAIN, VAL, TEST = (1, 2), (3,), (4, 5, 6, 7)
#: pid → {camera: number of images}
SEEN = {1: {1: 2, 3: 2}, 2: {2: 2, 6: 2}, 3: {4: 2, 3: 2},
        4: {1: 3, 2: 3, 3: 3, 4: 3, 5: 3, 6: 3},
        5: {1: 2, 2: 2, 3: 2},
        6: {2: 2, 5: 2, 6: 2},
        7: {4: 2, 6: 2}}


def image_name(pid: int, n: int) -> str:
    """``NNNN.jpg``: the fake numbers start at ``pid*10 + 1`` so frames differ per person."""
    return f"{pid * 10 + n:04d}.jpg"


def build(root: Path, folder_name: str = "SYSU-MM01") -> Path:
    """Write the tree into ``root/folder_name`` (e.g. ``SYSU-MM01/ori_data``)."""
    folder = Path(root) / folder_name
    for pid, cams in SEEN.items():
        for cam, count in cams.items():
            for n in range(1, count + 1):
                write_image(folder / f"cam{cam}" / f"{pid:04d}" / image_name(pid, n),
                            mode="L" if cam in (3, 6) else "RGB")
    exp = folder / "exp"
    exp.mkdir(parents=True)
    for name, ids in (("train_id", TRAIN), ("val_id", VAL), ("test_id", TEST),
                      ("available_id", TRAIN + VAL + TEST)):
        (exp / f"{name}.txt").write_text(",".join(str(i) for i in ids) + "\n")
        scipy.io.savemat(exp / f"{name}.mat", {"id": np.asarray(ids, dtype=np.float64)[None]})
    return folder


def random_permutations(seed: int = 0, trials: int = 10) -> dict[tuple[int, int], np.ndarray]:
    """``(cam, pid)`` → a (trials, n) uint8 matrix of 1-based permutations of 1..n, n = the
    fake images of ``pid`` in ``cam`` — what the official ``rand_perm_cam.mat`` holds."""
    rng = np.random.default_rng(seed)
    return {(cam, pid): np.stack([rng.permutation(count) + 1 for _ in range(trials)]
                                 ).astype(np.uint8)
            for pid, cams in SEEN.items() for cam, count in cams.items()}


def write_rand_perm(path: Path, perms: dict[tuple[int, int], np.ndarray],
                    num_ids: int = max(SEEN), trials: int = 10) -> Path:
    """Write ``perms`` as the official evaluation stores them: variable ``rand_perm_cam``, a
    6 × 1 cell (one per camera) of ``num_ids`` × 1 cells indexed by person id, each a
    (trials, n) matrix — (trials, 0) where the camera never saw the person."""
    outer = np.empty((6, 1), dtype=object)
    for cam in range(1, 7):
        inner = np.empty((num_ids, 1), dtype=object)
        for pid in range(1, num_ids + 1):
            inner[pid - 1, 0] = perms.get((cam, pid), np.zeros((trials, 0), np.uint8))
        outer[cam - 1, 0] = inner
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"rand_perm_cam": outer})
    return path
