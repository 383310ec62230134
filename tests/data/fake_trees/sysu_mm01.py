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
