"""Fake CUHK03: ``cuhk03_release/cuhk-03.mat`` written with h5py exactly as MATLAB v7.3 stores
cell arrays (object references, transposed storage, an empty cell) plus new-protocol .mat
files written with scipy."""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import scipy.io

#: persons per camera pair in the fake (real: 843, 440, 77, 58, 49)
PERSONS = (3, 2)


def build(root: Path) -> Path:
    folder = Path(root) / "cuhk03"
    (folder / "cuhk03_release").mkdir(parents=True)
    rng = np.random.default_rng(0)
    with h5py.File(folder / "cuhk03_release" / "cuhk-03.mat", "w") as h5:
        refs = h5.create_group("#refs#")
        count = [0]

        def store(array):
            count[0] += 1
            return refs.create_dataset(f"r{count[0]}", data=array).ref

        for subset in ("detected", "labeled"):
            pair_refs = []
            for pair, persons in enumerate(PERSONS):
                table = np.empty((10, persons), dtype=h5py.ref_dtype)   # stored (10, M)
                for person in range(persons):
                    for col in range(10):
                        if subset == "detected" and (pair, person, col) == (0, 1, 9):
                            table[col, person] = store(np.zeros(2, dtype=np.uint64))  # empty
                        else:
                            img = rng.integers(0, 255, (8, 4, 3), dtype=np.uint8)  # H×W×3
                            table[col, person] = store(img.T)                      # (3, W, H)
                pair_refs.append(store(table))
            h5.create_dataset(subset, data=np.array([pair_refs], dtype=h5py.ref_dtype))
        tests = [store(np.array([[1, 2], [1, 1]], dtype=np.float64).T),     # [pair, person]
                 store(np.array([[2, 1], [1, 3]], dtype=np.float64).T)]
        h5.create_dataset("testsets", data=np.array([tests], dtype=h5py.ref_dtype))
    for subset in ("detected", "labeled"):
        names, labels, cams = [], [], []
        for pair, persons in enumerate(PERSONS, start=1):
            for person in range(1, persons + 1):
                for col in range(1, 11):
                    if subset == "detected" and (pair, person, col) == (1, 2, 10):
                        continue
                    view = 1 if col <= 5 else 2
                    names.append(f"{pair}_{person:03d}_{view}_{col:02d}.png")
                    labels.append(sum(PERSONS[:pair - 1]) + person)   # 1..5
                    cams.append(view)
        labels = np.array(labels)
        train = np.flatnonzero(labels <= 2) + 1
        test = np.flatnonzero(labels > 2)
        query = np.concatenate([test[(labels[test] == lab) & (np.array(cams)[test] == cam)][:1]
                                for lab in np.unique(labels[test]) for cam in (1, 2)]) + 1
        gallery = np.setdiff1d(test + 1, query)
        filelist = np.empty((len(names), 1), dtype=object)
        filelist[:, 0] = names
        scipy.io.savemat(folder / f"cuhk03_new_protocol_config_{subset}.mat", {
            "filelist": filelist, "labels": labels[:, None], "camId": np.array(cams)[:, None],
            "train_idx": train[:, None], "query_idx": query[:, None],
            "gallery_idx": gallery[:, None]})
    return folder
