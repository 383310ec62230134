"""Fake GRID tree (docs/datasets.md): ``probe/`` and ``gallery/`` JPEGs named
``PPPP_C_<frame>_<x>_<y>_<w>.jpeg`` plus ``features_and_partitions.mat`` (MATLAB v5) whose
``trainIdxAll`` is a 1×10 cell of 1×1 structs with three fields, the third holding the
training person indices (as doubles, like MATLAB writes them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io

from tests.data.fake_trees import write_image


def camera_of(pid: int, view: str) -> int:
    """Physical camera 1..8 of the fake image of ``pid`` in ``view``."""
    return 1 + (pid + (0 if view == "probe" else 3)) % 8


def partitions(persons: int, train_ids: int) -> list[np.ndarray]:
    """The 10 sorted training-id vectors written into the fake mat."""
    rng = np.random.default_rng(7)
    return [np.sort(rng.permutation(np.arange(1, persons + 1))[:train_ids]) for _ in range(10)]


def write_mat(path: Path, parts, fields=("trainFeature", "testIdx", "trainIdx")) -> Path:
    """``features_and_partitions.mat`` with a 1×10 object array of 3-field structs."""
    cells = np.empty((1, len(parts)), dtype=object)
    for k, ids in enumerate(parts):
        cells[0, k] = {fields[0]: np.zeros((2, 2)), fields[1]: np.zeros((1, 1)),
                       fields[2]: np.asarray(ids, dtype=np.float64)[None, :]}
    scipy.io.savemat(path, {"trainIdxAll": cells, "features": np.zeros((3, 2))})
    return path


def build(root: Path, persons: int = 6, distractors: int = 3, train_ids: int = 3,
          wrapper: bool = True, mat: bool = True) -> Path:
    """``persons`` ids with one probe and one gallery image each, ``distractors`` ``0000``
    gallery images; the dataset folder is ``root/grid/underground_reid`` (``wrapper``) or
    ``root/underground_reid``."""
    folder = Path(root) / ("grid/underground_reid" if wrapper else "underground_reid")
    for p in range(1, persons + 1):
        for view in ("probe", "gallery"):
            write_image(folder / view / f"{p:04d}_{camera_of(p, view)}_{1000 + p}_12_34_56.jpeg")
    for d in range(distractors):
        write_image(folder / "gallery" / f"0000_{1 + d % 8}_{2000 + d}_1_2_3.jpeg")
    if mat:
        write_mat(folder / "features_and_partitions.mat", partitions(persons, train_ids))
    return folder
