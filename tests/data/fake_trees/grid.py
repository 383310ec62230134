"""Fake GRID tree: probe/ and gallery/ JPEGs plus features_and_partitions.mat (v5) whose
trainIdxAll is a 1×10 cell of 1×1 structs with three fields (the third = training ids)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io

from tests.data.fake_trees import write_image


def build(root: Path, persons: int = 6, distractors: int = 3, train_ids: int = 3,
          mat: bool = True) -> Path:
    folder = Path(root) / "grid" / "underground_reid"
    for p in range(1, persons + 1):
        write_image(folder / "probe" / f"{p:04d}_{1 + p % 8}_x{p}.jpeg")
        write_image(folder / "gallery" / f"{p:04d}_{1 + (p + 3) % 8}_y{p}.jpeg")
    for d in range(distractors):
        write_image(folder / "gallery" / f"0000_{1 + d % 8}_z{d}.jpeg")
    if mat:
        cells = np.empty((1, 10), dtype=object)
        rng = np.random.default_rng(0)
        for k in range(10):
            ids = np.sort(rng.permutation(np.arange(1, persons + 1))[:train_ids])
            cells[0, k] = {"features": np.zeros((2, 2)), "testIdx": np.zeros((1, 1)),
                           "trainIdx": ids.astype(np.float64)[None, :]}
        scipy.io.savemat(folder / "features_and_partitions.mat", {"trainIdxAll": cells})
    return folder
