"""CUHK03 (docs/datasets.md).

``cuhk03_release/cuhk-03.mat`` is MATLAB v7.3 (HDF5, read with h5py): ``detected`` and
``labeled`` hold 5 camera-pair cells, each an M×10 cell array of H×W×3 images (columns 1-5 =
view 1, 6-10 = view 2; some cells empty); ``testsets`` holds the 20 classic test splits
(100 ``[pair, person]`` rows each). HDF5 stores everything transposed and as object
references. The first load of a subset extracts its images once to
``images_{subset}/{pair}_{person:03d}_{view}_{col:02d}.png`` (the names the new-protocol
``filelist`` uses), atomically: into a temporary sibling folder renamed into place at the end.

Protocols: ``new`` (Zhong et al. CVPR'17, 767 train / 700 test ids, from
``cuhk03_new_protocol_config_{subset}.mat``; pid = the mat's ``labels``, eval rule E1),
``classic`` (20 trials from ``testsets``; pid = pair·1000 + person; query = gallery = all test
images; eval rule E2 ``cuhk03_sgs``) and ``warca`` (WARCA paper Sect. 4.2 on the standard
splits: the first 10 ``testsets`` are the test persons of splits 0–9, every other person
trains; ``draws`` (10) draws per split of one probe per test person with its other images
as the gallery — ``warca_draw=probe_single``, or ``gallery_single`` — eval rule E3;
docs/datasets.md).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from reidcli.data.datasets.common import require_file, rows_to_frame
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial, relative_paths, split_from_trial
from reidcli.data.trials import check_choice
from reidcli.errors import DatasetError

RELEASE = Path("cuhk03_release") / "cuhk-03.mat"
SUBSETS = ("detected", "labeled")
PROTOCOLS = ("new", "classic", "warca")
#: the WARCA paper's CUHK03 splits: "the standard splits", 10 of them (Sect. 4.2)
WARCA_SPLITS = 10
#: extracted image name: pair, person (1-based within the pair), view, column
IMAGE_NAME = re.compile(r"^(\d)_(\d{3})_([12])_(\d{2})\.png$")
#: keys of the new-protocol config files
NEW_KEYS = ("labels", "camId", "filelist", "train_idx", "query_idx", "gallery_idx")
PARTIAL = ".partial-"
_GET_MAT = "use the cuhk-03.mat of cuhk03_release.zip (see `reid data info cuhk03`)"

INFO = DatasetInfo(
    name="cuhk03", title="CUHK03",
    url="http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (cuhk03_release.zip, "
        "access on request to the authors); new-protocol files: "
        "https://github.com/zhunzhong07/person-re-ranking (evaluation/data/CUHK03)",
    license="access on request to the authors; no redistribution — reidcli never downloads it",
    tree="cuhk03/\n"
         "  cuhk03_release/cuhk-03.mat   (MATLAB v7.3: detected, labeled, testsets)\n"
         "  cuhk03_new_protocol_config_detected.mat  cuhk03_new_protocol_config_labeled.mat\n"
         "  images_detected/ images_labeled/   (written on first use: "
         "{pair}_{person:03d}_{view}_{col:02d}.png)",
    candidates=("cuhk03", "CUHK03", "."),
    cameras="2 views",
    counts={"train": (7365, 767), "query": (1400, 700), "gallery": (5332, 700)},
    options={"subset": "detected", "protocol": "new", "draws": 10,
             "warca_draw": "probe_single", "same_camera": "drop"},
    protocol="new (767 train / 700 test ids); defaults: protocol=new, subset=detected",
    notes=("defaults: protocol=new, subset=detected (counts above); subset=labeled: train "
           "7,368 / 767, query 1,400 / 700, gallery 5,328 / 700",
           "first use extracts the subset's images from cuhk-03.mat into images_<subset>/ "
           "(once; the cuhk03 folder must be writable then)",
           "protocol=classic: 20 trials (--trial 0..19) from testsets, pid = pair·1000 + "
           "person, query = gallery = the 100 test persons' images, eval rule cuhk03_sgs "
           "(single-gallery-shot, 10 repeats)",
           "protocol=new: pid = the config's labels (1..1467), camid = camId - 1",
           "protocol=warca: splits 0-9 = testsets 1-10 (100 test persons each, the rest "
           "train), draws (10) per split (trial t = split t // draws, draw t % draws), "
           "warca_draw=probe_single|gallery_single, same_camera=drop|keep; the WARCA paper "
           "uses subset=labeled"))


def looks_valid(folder: Path) -> bool:
    """A CUHK03 folder holds ``cuhk03_release/cuhk-03.mat`` (or at least ``cuhk03_release/``,
    so that a missing mat is reported by name)."""
    folder = Path(folder)
    return (folder / RELEASE).is_file() or (folder / RELEASE.parent).is_dir()


def _check_options(subset: str, protocol: str) -> tuple[str, str]:
    """``(subset, protocol)`` in canonical form; ParameterError naming a bad one."""
    return (check_choice("cuhk03", "subset", subset, SUBSETS),
            check_choice("cuhk03", "protocol", protocol, PROTOCOLS))


# --------------------------------------------------------------------------- cuhk-03.mat

def _open_h5(mat_path: Path):
    import h5py

    try:
        return h5py.File(mat_path, "r")
    except OSError as exc:
        raise DatasetError(f"cuhk03: {mat_path} is not a MATLAB v7.3 (HDF5) file ({exc})",
                           _GET_MAT) from None


def _variable(h5, mat_path: Path, key: str):
    if key not in h5:
        raise DatasetError(f"cuhk03: {mat_path} has no variable {key!r}", _GET_MAT)
    return h5[key]


def _deref(h5, ref, mat_path: Path, what: str) -> np.ndarray:
    try:
        return h5[ref][()]
    except (ValueError, TypeError, KeyError, OSError) as exc:
        raise DatasetError(f"cuhk03: {mat_path}: {what} is not an object reference ({exc})",
                           _GET_MAT) from None


def iter_images(h5, mat_path: Path, subset: str):
    """``(name, H×W×3 uint8 image)`` for every non-empty cell of ``subset`` (pair by pair)."""
    cells = np.asarray(_variable(h5, mat_path, subset)[()]).ravel()      # (1, 5) refs
    for pair, pair_ref in enumerate(cells, start=1):
        table = np.asarray(_deref(h5, pair_ref, mat_path, f"{subset} cell {pair}"))
        table = table.T if table.ndim == 2 else table                      # (10, M) → (M, 10)
        if table.ndim != 2 or table.shape[1] != 10:
            raise DatasetError(f"cuhk03: {mat_path}: {subset} cell {pair} has shape "
                               f"{table.shape[::-1]}, expected M×10", _GET_MAT)
        for person in range(table.shape[0]):
            for col in range(10):
                img = np.asarray(_deref(h5, table[person, col], mat_path,
                                        f"{subset} cell {pair} [{person + 1}, {col + 1}]"))
                if img.ndim < 3 or img.size == 0:
                    continue                                   # empty cell
                view = 1 if col < 5 else 2
                name = f"{pair}_{person + 1:03d}_{view}_{col + 1:02d}.png"
                yield name, np.ascontiguousarray(img.T)                    # (3, W, H) → H×W×3


def read_testsets(mat_path: Path) -> list[np.ndarray]:
    """The classic test splits: one ``(100, 2)`` int array of 1-based ``[pair, person]``."""
    with _open_h5(mat_path) as h5:
        refs = np.asarray(_variable(h5, mat_path, "testsets")[()]).ravel()
        out = []
        for k, ref in enumerate(refs, start=1):
            rows = np.asarray(_deref(h5, ref, mat_path, f"testsets cell {k}"))
            rows = rows.T if rows.ndim == 2 and rows.shape[0] == 2 else rows   # (2,100) → (100,2)
            if rows.ndim != 2 or rows.shape[1] != 2:
                raise DatasetError(f"cuhk03: {mat_path}: testsets cell {k} has shape "
                                   f"{rows.shape}, expected 100×2 [pair, person]", _GET_MAT)
            out.append(np.rint(rows).astype(np.int64))
    return out


# --------------------------------------------------------------------------- extraction

def _clean_stale(parent: Path, stem: str) -> None:
    """Remove temporary folders left by an extraction whose process no longer runs."""
    for entry in parent.glob(f"{stem}{PARTIAL}*"):
        try:
            pid = int(entry.name[len(stem) + len(PARTIAL):].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except (ValueError, OSError):
            continue                      # not ours, or the process still runs


def extract_images(mat_path: Path, subset: str, out: Path) -> Path:
    """Write every image of ``subset`` as PNG into ``out`` once; returns ``out``.

    The PNGs go to a temporary sibling folder that is renamed to ``out`` only when complete,
    so an interrupted extraction never looks done. A read-only dataset folder gives a
    DatasetError saying what to do.
    """
    from PIL import Image

    out = Path(out)
    if out.is_dir():
        return out
    _clean_stale(out.parent, out.name)
    todo = (f"make {out.parent} writable for the first load (it extracts the {subset} "
            "images from cuhk-03.mat once), or copy the folder somewhere writable")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}{PARTIAL}{os.getpid()}-",
                                    dir=out.parent))
    except OSError as exc:
        raise DatasetError(f"cuhk03: cannot create the image cache {out} "
                           f"({exc.strerror or exc})", todo) from None
    try:
        tmp.chmod(0o755)                 # mkdtemp makes it private; the cache is shared data
        with _open_h5(mat_path) as h5:
            for name, img in iter_images(h5, mat_path, subset):
                try:
                    Image.fromarray(img).save(tmp / name)
                except OSError as exc:
                    raise DatasetError(f"cuhk03: cannot write {tmp / name} "
                                       f"({exc.strerror or exc})", todo) from None
        try:
            os.replace(tmp, out)
        except OSError:
            if not out.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)     # a concurrent load finished first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_images(folder: Path, subset: str) -> pd.DataFrame:
    """All images of a subset (extracted on first use); pid = pair·1000 + person."""
    mat_path = folder / RELEASE
    images = folder / f"images_{subset}"
    if not images.is_dir():
        extract_images(require_file(mat_path, "cuhk03"), subset, images)
    rows = []
    for name in sorted(os.listdir(images)):
        if not name.lower().endswith(".png"):
            continue
        match = IMAGE_NAME.match(name)
        if match is None:
            raise DatasetError(f"cuhk03: malformed image name {images / name}",
                               "expected {pair}_{person:03d}_{view}_{col:02d}.png; delete "
                               f"{images} to extract again")
        pair, person, view, col = (int(g) for g in match.groups())
        rows.append({"path": images / name, "pid": pair * 1000 + person, "camid": view - 1,
                     "frame": col, "x_pair": pair, "x_person": person})
    if not rows:
        raise DatasetError(f"cuhk03: {images} holds no images",
                           f"delete {images} to extract again")
    return rows_to_frame(rows, "cuhk03")


# --------------------------------------------------------------------------- protocols

def _column(mat: dict, key: str) -> np.ndarray:
    return np.asarray(mat[key]).ravel()


def read_new_config(folder: Path, subset: str) -> dict:
    """Validated content of ``cuhk03_new_protocol_config_{subset}.mat`` (1-based indices)."""
    import scipy.io
    from scipy.io.matlab import MatReadError

    path = require_file(folder / f"cuhk03_new_protocol_config_{subset}.mat", "cuhk03")
    todo = "use the new-protocol files of zhunzhong07/person-re-ranking (evaluation/data/CUHK03)"
    try:
        mat = scipy.io.loadmat(path)
    except (MatReadError, ValueError, NotImplementedError, OSError, TypeError) as exc:
        raise DatasetError(f"cuhk03: cannot read {path} as a MATLAB v5 file ({exc})",
                           todo) from None
    missing = [k for k in NEW_KEYS if k not in mat]
    if missing:
        raise DatasetError(f"cuhk03: {path} lacks the key(s) {', '.join(missing)}", todo)
    names = []
    for cell in _column(mat, "filelist"):
        value = np.asarray(cell).ravel()
        names.append(str(value[0]).strip() if value.size else "")
    labels, cams = _column(mat, "labels"), _column(mat, "camId")
    for key, values in (("labels", labels), ("camId", cams)):
        _check_label_values(values, key, path, todo)
    if not len(labels) == len(cams) == len(names):
        raise DatasetError(f"cuhk03: {path}: filelist, labels and camId differ in length "
                           f"({len(names)}, {len(labels)}, {len(cams)})", todo)
    config = {"path": path, "names": names, "labels": labels.astype(np.int64),
              "cams": cams.astype(np.int64)}
    for split in ("train", "query", "gallery"):
        config[split] = _split_indices(_column(mat, f"{split}_idx"), split, len(names), path,
                                       todo)
    return config


def _check_label_values(values: np.ndarray, key: str, path: Path, todo: str) -> None:
    """DatasetError unless ``values`` [n] are whole numbers in [0, 2**31)."""
    if values.dtype.kind not in "uif" or not np.all(np.isfinite(values)) or values.size \
            and (values.min() < 0 or values.max() > 2**31 - 1
                 or not np.array_equal(values, np.round(values))):
        raise DatasetError(f"cuhk03: {path}: {key} holds something other than integers "
                           f"in [0, 2**31)", todo)


def _split_indices(raw: np.ndarray, split: str, n: int, path: Path, todo: str) -> np.ndarray:
    """The 1-based indices [m] of ``split`` (``<split>_idx``), each in 1..n."""
    if raw.dtype.kind not in "uif" or not np.all(np.isfinite(raw)):
        raise DatasetError(f"cuhk03: {path}: {split}_idx is not a list of indices", todo)
    idx = raw.astype(np.int64)
    if idx.size and (idx.min() < 1 or idx.max() > n):
        raise DatasetError(f"cuhk03: {path}: {split}_idx holds indices outside "
                           f"1..{n}", todo)
    return idx


def new_protocol(folder: Path, subset: str, config: dict,
                 records: pd.DataFrame) -> DatasetSplit:
    """The 767/700 split of the new-protocol config (pid = labels, camid = camId - 1)."""
    by_name = {Path(p).name: i for i, p in enumerate(records["path"])}
    unknown = [n for n in config["names"] if n not in by_name]
    if unknown:
        raise DatasetError(f"cuhk03: {config['path']} lists {unknown[0]!r}, which is not in "
                           f"{folder / f'images_{subset}'}",
                           f"delete images_{subset} to extract again, or check the files")
    table = records.iloc[[by_name[n] for n in config["names"]]].reset_index(drop=True)
    table["pid"] = config["labels"]
    table["camid"] = config["cams"] - 1
    parts = {}
    for split in ("train", "query", "gallery"):
        part = table.iloc[config[split] - 1].copy()
        part["split"] = split
        parts[split] = normalize_frame(part.sort_values("path", kind="stable")
                                       .reset_index(drop=True))
    return DatasetSplit(name="cuhk03", train=parts["train"], query=parts["query"],
                        gallery=parts["gallery"], eval_rule="market", protocol="new",
                        options={"subset": subset, "protocol": "new"})


def classic_protocol(folder: Path, subset: str, testsets: list[np.ndarray],
                     records: pd.DataFrame, trial: int) -> DatasetSplit:
    """Trial ``trial`` of the 20 ``testsets`` splits (E2, single-gallery-shot)."""
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    trials = []
    for rows in testsets:
        test = np.isin(pids, rows[:, 0] * 1000 + rows[:, 1])
        trials.append({"train": rel[~test].tolist(), "query": rel[test].tolist(),
                       "gallery": rel[test].tolist()})
    return split_from_trial("cuhk03", records, trials, trial, folder, protocol="classic",
                            options={"subset": subset, "protocol": "classic"},
                            eval_rule="cuhk03_sgs", eval_kwargs={"n_repeats": 10})


def warca_protocol(folder: Path, subset: str, testsets: list[np.ndarray],
                   records: pd.DataFrame, trial: int, *, draws: int, warca_draw: str,
                   same_camera: str) -> DatasetSplit:
    """Trial ``trial`` of WARCA's CUHK03 protocol: split ``trial // draws`` tests the persons
    of ``testsets[trial // draws]`` (the standard splits), draw ``trial % draws``."""
    from reidcli.data.trials import Pool, load_warca

    splits = testsets[:WARCA_SPLITS]
    if len(splits) < WARCA_SPLITS:
        raise DatasetError(f"cuhk03: {folder / RELEASE} holds {len(splits)} test splits; the "
                           f"WARCA protocol uses the first {WARCA_SPLITS}", _GET_MAT)
    pool = Pool.of("cuhk03", folder, records)
    test_sets = [rows[:, 0] * 1000 + rows[:, 1] for rows in splits]
    return load_warca(pool, trial, seed=0, test_ids=None, draws=draws,
                      warca_draw=warca_draw, same_camera=same_camera,
                      options={"subset": subset}, test_sets=test_sets,
                      test_sets_name=f"{subset}_testsets1-{WARCA_SPLITS}")


def load_cuhk03(root=None, trial: int = 0, subset: str = "detected",
                protocol: str = "new", draws: int = 10, warca_draw: str = "probe_single",
                same_camera: str = "drop") -> DatasetSplit:
    """Load CUHK03 (``new``: one split; ``classic``: trial 0..19 of ``testsets``; ``warca``:
    trial 0..10·draws−1 on testsets 1–10)."""
    subset, protocol = _check_options(subset, protocol)
    folder = resolve_dataset_dir("cuhk03", root)
    if protocol == "new":
        check_trial("cuhk03", trial, 1, "protocol 'new'")
        config = read_new_config(folder, subset)      # validated before any extraction
        return new_protocol(folder, subset, config, read_images(folder, subset))
    testsets = read_testsets(require_file(folder / RELEASE, "cuhk03"))
    if protocol == "warca":
        return warca_protocol(folder, subset, testsets, read_images(folder, subset), trial,
                              draws=draws, warca_draw=warca_draw, same_camera=same_camera)
    return classic_protocol(folder, subset, testsets, read_images(folder, subset), trial)


register(INFO, load_cuhk03, looks_valid)
