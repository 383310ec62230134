"""CUHK03 (datasets.md §5.4): ``cuhk03_release/cuhk-03.mat`` (MATLAB v7.3 = HDF5), images
extracted once to ``images_{detected,labeled}/{pair}_{person:03d}_{view}_{col:02d}.png``;
protocols ``new`` (767/700, ``cuhk03_new_protocol_config_<subset>.mat``) and ``classic``
(the 20 ``testsets`` splits, evaluated single-gallery-shot)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from reidcli.data.datasets.common import require_file, rows_to_frame
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import relative_paths, split_from_trial
from reidcli.errors import DatasetError, UsageError

RELEASE = Path("cuhk03_release") / "cuhk-03.mat"
SUBSETS = ("detected", "labeled")

INFO = DatasetInfo(
    name="cuhk03", title="CUHK03",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (cuhk03_release.zip, on "
        "request); new-protocol files: github.com/zhunzhong07/person-re-ranking "
        "(evaluation/data/CUHK03)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk03/\n  cuhk03_release/cuhk-03.mat   (MATLAB v7.3: detected, labeled, testsets)\n"
         "  cuhk03_new_protocol_config_detected.mat  cuhk03_new_protocol_config_labeled.mat\n"
         "  images_detected/ images_labeled/   (written on first use)",
    candidates=("cuhk03", "CUHK03", "."),
    cameras="2 views",
    counts={"train": (7365, 767), "query": (1400, 700), "gallery": (5332, 700)},
    options={"subset": "detected", "protocol": "new"},
    protocol="new (767 train / 700 test ids; subset detected by default)",
    notes=("first use extracts the images from cuhk-03.mat (a few minutes, once)",
           "classic protocol: pid = pair·1000 + person; new protocol: pid = the mat's label"))


def _check(subset: str, protocol: str) -> None:
    if subset not in SUBSETS:
        raise UsageError(f"cuhk03 option subset={subset!r}", "use subset=detected or labeled")
    if protocol not in ("new", "classic"):
        raise UsageError(f"cuhk03 option protocol={protocol!r}", "use protocol=new or classic")


def extract_images(mat_path: Path, subset: str, out: Path) -> Path:
    """Write every image of ``subset`` as PNG into ``out`` (atomically); returns ``out``."""
    import h5py
    from PIL import Image

    if out.is_dir():
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise DatasetError(f"cuhk03: cannot create {tmp} ({exc.strerror})",
                           "make the cuhk03 folder writable once so images can be "
                           "extracted") from None
    try:
        with h5py.File(mat_path, "r") as h5:
            if subset not in h5:
                raise DatasetError(f"cuhk03: {mat_path} has no variable {subset!r}",
                                   "use the cuhk-03.mat of cuhk03_release.zip")
            cells = h5[subset]
            for pair in range(cells.shape[1]):
                table = h5[cells[0][pair]][()].T                  # (M, 10) object refs
                for person in range(table.shape[0]):
                    for col in range(table.shape[1]):
                        img = h5[table[person, col]][()]
                        if img.ndim < 3 or img.size == 0:
                            continue                               # empty cell
                        view = 1 if col < 5 else 2
                        name = f"{pair + 1}_{person + 1:03d}_{view}_{col + 1:02d}.png"
                        Image.fromarray(np.ascontiguousarray(img.T)).save(tmp / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.replace(tmp, out)
    return out


def _records(folder: Path, subset: str) -> "object":
    images = extract_images(require_file(folder / RELEASE, "cuhk03"), subset,
                            folder / f"images_{subset}")
    rows = []
    for name in sorted(os.listdir(images)):
        parts = name[:-4].split("_")
        if not name.endswith(".png") or len(parts) != 4:
            continue
        pair, person, view, col = (int(v) for v in parts)
        rows.append({"path": images / name, "pid": pair * 1000 + person, "camid": view - 1,
                     "frame": col, "x_pair": pair, "x_person": person})
    return rows_to_frame(rows, "cuhk03")


def _testsets(mat_path: Path) -> list[np.ndarray]:
    import h5py

    with h5py.File(mat_path, "r") as h5:
        if "testsets" not in h5:
            raise DatasetError(f"cuhk03: {mat_path} has no variable 'testsets'",
                               "use the cuhk-03.mat of cuhk03_release.zip")
        refs = h5["testsets"]
        return [h5[refs[0][k]][()].T.astype(np.int64) for k in range(refs.shape[1])]


def _new_protocol(folder: Path, subset: str, records) -> DatasetSplit:
    import scipy.io

    path = require_file(folder / f"cuhk03_new_protocol_config_{subset}.mat", "cuhk03")
    mat = scipy.io.loadmat(path)
    missing = [k for k in ("labels", "camId", "filelist", "train_idx", "query_idx",
                           "gallery_idx") if k not in mat]
    if missing:
        raise DatasetError(f"cuhk03: {path} lacks {', '.join(missing)}",
                           "use the new-protocol files of zhunzhong07/person-re-ranking")
    names = [str(np.asarray(c).ravel()[0]) for c in np.asarray(mat["filelist"]).ravel()]
    labels = np.asarray(mat["labels"]).ravel().astype(np.int64)
    cams = np.asarray(mat["camId"]).ravel().astype(np.int64)
    by_name = {Path(p).name: i for i, p in enumerate(records["path"])}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise DatasetError(f"cuhk03: {path} lists {unknown[0]}, which is not among the "
                           "extracted images", "delete images_* to re-extract, or check the "
                           "subset")
    table = records.iloc[[by_name[n] for n in names]].reset_index(drop=True)
    table["pid"], table["camid"] = labels, cams - 1
    parts = {}
    for split in ("train", "query", "gallery"):
        idx = np.asarray(mat[f"{split}_idx"]).ravel().astype(np.int64) - 1
        part = table.iloc[idx].copy()
        part["split"] = split
        parts[split] = normalize_frame(part.sort_values("path").reset_index(drop=True))
    return DatasetSplit(name="cuhk03", train=parts["train"], query=parts["query"],
                        gallery=parts["gallery"], eval_rule="market", protocol="new",
                        options={"subset": subset, "protocol": "new"})


def load_cuhk03(root=None, trial: int = 0, subset: str = "detected",
                protocol: str = "new") -> DatasetSplit:
    """Load CUHK03 (``new``: one split; ``classic``: trial 0..19 of ``testsets``)."""
    _check(subset, protocol)
    folder = resolve_dataset_dir("cuhk03", root)
    records = _records(folder, subset)
    if protocol == "new":
        return _new_protocol(folder, subset, records)
    tests = _testsets(folder / RELEASE)
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    trials = []
    for pairs in tests:
        test_pids = pairs[:, 0] * 1000 + pairs[:, 1]
        test = np.isin(pids, test_pids)
        trials.append({"train": rel[~test].tolist(), "query": rel[test].tolist(),
                       "gallery": rel[test].tolist()})
    return split_from_trial("cuhk03", records, trials, trial, folder, protocol="classic",
                            options={"subset": subset, "protocol": "classic"},
                            eval_rule="cuhk03_sgs", eval_kwargs={"n_repeats": 10})


register(INFO, load_cuhk03, lambda p: (p / RELEASE).is_file())
