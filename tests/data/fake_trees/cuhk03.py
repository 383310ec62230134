"""Fake CUHK03 (docs/datasets.md).

``cuhk03/cuhk03_release/cuhk-03.mat`` is written with h5py the way MATLAB v7.3 stores cell
arrays: object references into ``#refs#``, transposed storage (a pair cell stored (10, M), an
H×W×3 image stored (3, W, H), a testsets cell stored (2, n)), and an empty cell stored as a
tiny 1-D array. Plus ``cuhk03_new_protocol_config_{detected,labeled}.mat`` via scipy.

Content: 2 camera pairs with 3 and 2 persons (pids 1001-1003, 2001-2002), 10 images each
(8 high × 4 wide); in ``detected`` the cell (pair 1, person 2, column 10) is empty → 49
detected and 50 labeled images. ``testsets``: split 1 = [1,2], [1,1]; split 2 = [2,1], [1,3].
New protocol: labels 1..5 in pair/person order, train = labels 1, 2; test = labels 3, 4, 5 with
the first image of each view as query (6) and the rest as gallery (24).
"""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import scipy.io

#: persons per camera pair in the fake (real: 843, 440, 77, 58, 49)
PERSONS = (3, 2)
#: (pair, person, column) of the empty detected cell (1-based)
EMPTY = (1, 2, 10)
TESTSETS = ([[1, 2], [1, 1]], [[2, 1], [1, 3]])
HEIGHT, WIDTH = 8, 4


def pixel_image(subset: str, pair: int, person: int, col: int) -> np.ndarray:
    """The H×W×3 uint8 image stored for one cell (distinct per cell, not symmetric)."""
    base = (0 if subset == "detected" else 100) + pair * 40 + person * 10 + col
    grid = np.arange(HEIGHT * WIDTH * 3, dtype=np.int64).reshape(HEIGHT, WIDTH, 3)
    return ((grid + base) % 256).astype(np.uint8)


def write_release_mat(path: Path, drop: str | None = None) -> None:
    """``cuhk-03.mat`` as MATLAB v7.3 writes it; ``drop`` omits one variable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as h5:
        refs = h5.create_group("#refs#")
        count = [0]

        def store(array, matlab_class: str):
            count[0] += 1
            ds = refs.create_dataset(f"r{count[0]}", data=array)
            ds.attrs["MATLAB_class"] = np.bytes_(matlab_class)
            return ds.ref

        for subset in ("detected", "labeled"):
            pair_refs = []
            for pair, persons in enumerate(PERSONS, start=1):
                table = np.empty((10, persons), dtype=h5py.ref_dtype)       # stored (10, M)
                for person in range(1, persons + 1):
                    for col in range(1, 11):
                        if subset == "detected" and (pair, person, col) == EMPTY:
                            table[col - 1, person - 1] = store(np.zeros(2, np.uint64), "double")
                        else:
                            img = pixel_image(subset, pair, person, col)
                            table[col - 1, person - 1] = store(img.T, "uint8")  # (3, W, H)
                pair_refs.append(store(table, "cell"))
            if subset != drop:
                h5.create_dataset(subset, data=np.array([pair_refs], dtype=h5py.ref_dtype))
        tests = [store(np.array(rows, dtype=np.float64).T, "double") for rows in TESTSETS]
        if drop != "testsets":
            h5.create_dataset("testsets", data=np.array([tests], dtype=h5py.ref_dtype))


def image_names(subset: str) -> list[str]:
    """Extracted names of a subset, in pair/person/column order."""
    names = []
    for pair, persons in enumerate(PERSONS, start=1):
        for person in range(1, persons + 1):
            for col in range(1, 11):
                if subset == "detected" and (pair, person, col) == EMPTY:
                    continue
                names.append(f"{pair}_{person:03d}_{1 if col <= 5 else 2}_{col:02d}.png")
    return names


def write_new_protocol(folder: Path, subset: str, drop: str | None = None) -> Path:
    """``cuhk03_new_protocol_config_{subset}.mat`` (v5); ``drop`` omits one key."""
    names = image_names(subset)
    pairs = [int(n[0]) for n in names]
    persons = [int(n[2:5]) for n in names]
    labels = np.array([sum(PERSONS[:pair - 1]) + person for pair, person in zip(pairs, persons)])
    cams = np.array([int(n[6]) for n in names])
    train = np.flatnonzero(labels <= 2) + 1
    test = np.flatnonzero(labels > 2)
    query = np.array([test[(labels[test] == lab) & (cams[test] == cam)][0]
                      for lab in np.unique(labels[test]) for cam in (1, 2)]) + 1
    gallery = np.setdiff1d(test + 1, query)
    filelist = np.empty((len(names), 1), dtype=object)
    filelist[:, 0] = names
    content = {"filelist": filelist, "labels": labels[:, None], "camId": cams[:, None],
               "train_idx": train[:, None], "query_idx": query[:, None],
               "gallery_idx": gallery[:, None]}
    content.pop(drop, None)
    path = folder / f"cuhk03_new_protocol_config_{subset}.mat"
    scipy.io.savemat(path, content)
    return path


def build(root: Path, wrapper: bool = True) -> Path:
    """Write the tree to ``root/cuhk03`` (``wrapper``) or ``root``; returns that folder."""
    folder = Path(root) / "cuhk03" if wrapper else Path(root)
    write_release_mat(folder / "cuhk03_release" / "cuhk-03.mat")
    for subset in ("detected", "labeled"):
        write_new_protocol(folder, subset)
    return folder
