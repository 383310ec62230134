"""SYSU-MM01 (docs/datasets.md, evaluation rule E4 ``sysu``).

Tree: ``cam1/``..``cam6/`` each with ``PPPP/NNNN.jpg`` (a person folder only where that camera
saw the person) and ``exp/{available,train,val,test}_id.txt`` (one comma line of ids).
Cameras 3 and 6 are infrared, 1, 2, 4, 5 visible. Records: ``camid = cam − 1``,
``frame = NNNN``, ``modality`` per camera, ``x_location`` = E4's location of the camera
(cams 2 and 3 share a room) — the evaluation derives the same locations from ``camid``.

Protocol: train = every image of the train ids (+ val ids by default), all six cameras;
query = every IR image (cams 3, 6) of the test ids, in both modes; gallery of trial t (0..9)
= for each test id and gallery camera (all-search 1, 2, 4, 5; indoor-search 1, 2) ``shots``
images of that person in that camera (all of them when fewer exist). Which images is decided
by one of three draw families, option ``draws`` (docs/datasets.md, "SYSU-MM01 gallery draws");
the default (``draws=auto``) is ``official`` when the permutation file is present
(``exp/rand_perm_cam.mat``, or ``perm_file``), else ``seeded``:

* ``seeded`` — reidcli's own generator seeded from ``seed``;
* ``official`` — the fixed permutations ``rand_perm_cam.mat`` of the dataset's official
  MATLAB evaluation (Wu et al., ICCV 2017): variable ``rand_perm_cam``, a 6 × 1 cell (one per
  camera) of per-person cells indexed by the person id, each a 10 × n matrix whose row r is a
  permutation of 1..n over the n images of that person in that camera (10 × 0 where the camera
  never saw the person). Trial t takes the first ``shots`` entries of row t + 1; entry i names
  the i-th image of the person's folder in name order;
* ``agw`` — the draws of the AGW baseline code (Ye et al., TPAMI 2021): Python's
  ``random.seed(t)``, then for each test id (ascending) and gallery camera (ascending) one
  ``random.choice`` over the sorted listing of ``cam<k>/<PPPP>/`` — single-shot only.

The trials are cached as JSON next to the data under a key that names the family; the split's
protocol (e.g. ``all_search_1shot_official``) and options (``draws``) name it too, so a store
built from the split carries it — report it with the results.
"""
from __future__ import annotations

import hashlib
import io
import os
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
from scipy.io.matlab import MatReadError

from reidcli.data.datasets.common import parse_number, read_text, require_dir, rows_to_frame
from reidcli.data.datasets.market_folder import list_images
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import (Trial, cached_trials, protocol_rng, relative_paths,
                                 split_from_trial)
from reidcli.data.trials import check_choice
from reidcli.errors import DatasetError, UsageError
from reidcli.naming import param
from reidcli.params import BOOL, Interval, check_param, check_seed

IMAGE = re.compile(r"^(\d+)\.jpg$")
CAMERAS = (1, 2, 3, 4, 5, 6)
IR_CAMERAS = (3, 6)
GALLERY_CAMERAS = {"all": (1, 2, 4, 5), "indoor": (1, 2)}
#: E4 locations of the 1-based cameras (cams 2 and 3 share room 2)
LOCATION = {1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}
ID_FILES = ("train_id.txt", "val_id.txt", "test_id.txt")
NUM_TRIALS = 10
#: gallery draw families (module doc)
DRAWS = ("seeded", "official", "agw")
#: the default: official when the permutation file is present, else seeded
AUTO_DRAWS = "auto"
#: most gallery images drawn per test id and camera (the protocols use 1 and 10)
MAX_SHOTS = 1000
#: where draws=official looks for the permutations inside the dataset folder by default
PERM_FILE = Path("exp") / "rand_perm_cam.mat"
#: the MATLAB variable holding them
PERM_VARIABLE = "rand_perm_cam"
OFFICIAL_SOURCE = ("evaluation/data_split/rand_perm_cam.mat of "
                   "https://github.com/wuancong/SYSU-MM01")

INFO = DatasetInfo(
    name="sysu_mm01", title="SYSU-MM01 (visible-infrared)", aliases=("sysu",),
    url="https://github.com/wuancong/SYSU-MM01 (signed dataset release agreement e-mailed to "
        "wuanc@mail.sysu.edu.cn; the download link is sent on approval)",
    license="signed release agreement required; no redistribution — reidcli never downloads it",
    tree="SYSU-MM01/   (or sysu-mm01/, SYSU-MM01/ori_data/)\n"
         "  cam1/ .. cam6/   PPPP/NNNN.jpg   (cams 3, 6 infrared; 1, 2 indoor, 4, 5 outdoor)\n"
         "  exp/ available_id.txt train_id.txt val_id.txt test_id.txt   (one comma line each; "
         ".mat twins unused)\n"
         "  exp/rand_perm_cam.mat   (only for draws=official: copy it from the official "
         "evaluation, " + OFFICIAL_SOURCE + ")",
    candidates=("SYSU-MM01", "sysu-mm01", "SYSU-MM01/ori_data", "sysu_mm01", "."),
    cameras="6 (4 visible, 2 infrared)",
    counts={"train": (34167, 395), "query": (3803, 96), "gallery": (301, 96)},
    # indoor-search galleries hold the 56 test ids seen by cams 1, 2; multi-shot = 10 images
    # per id and camera (docs/datasets.md); the train ids alone are not documented
    count_variants=(({"mode": "indoor"}, {"gallery": (112, 56)}),
                    ({"shots": 10}, {"gallery": (3010, 96)}),
                    ({"mode": "indoor", "shots": 10}, {"gallery": (1120, 56)}),
                    ({"train_includes_val": False}, {"train": None})),
    count_options=("mode", "shots", "train_includes_val"),
    options={"mode": "all", "shots": 1, "train_includes_val": True, "seed": 0,
             "draws": AUTO_DRAWS, "perm_file": None},
    protocol="all-search single-shot: query = 3,803 IR images of the 96 test ids, gallery "
             "re-drawn in each of 10 trials (draws=official when exp/rand_perm_cam.mat is "
             "present, else seeded; or agw)",
    eval_rule="sysu",
    notes=("train (default, train + val ids) = 22,258 visible + 11,909 infrared images",
           "mode=indoor uses gallery cams 1, 2 (112 images single-shot); shots=10 is "
           "multi-shot",
           "draws=auto (default): official when exp/rand_perm_cam.mat (or perm_file=PATH) "
           "exists, else seeded",
           "draws=seeded: reidcli's own seeded gallery draws (seed=N), cached in "
           "reidcli_splits/",
           "draws=official: the official evaluation's fixed permutations, trial t = row t+1 "
           "of exp/rand_perm_cam.mat (or perm_file=PATH); from " + OFFICIAL_SOURCE,
           "draws=agw: the AGW code's draws (random.seed(trial), trial 0..9, one "
           "random.choice per id and camera); single-shot only",
           "the protocol name ends with the draw family (all_search_1shot_official); say "
           "which with the results"),
    unconfirmed=("draws=official: entry i of a rand_perm_cam.mat row names the i-th image of "
                 "the person's folder in name order (the evaluation's feature{id}(i,:))",))


def looks_like_sysu(path: Path) -> bool:
    return (path / "exp" / "test_id.txt").is_file() and (path / "cam1").is_dir()


def read_ids(path: Path) -> np.ndarray:
    """Sorted ids of an ``exp/*_id.txt`` file (integers separated by commas/whitespace)."""
    text = read_text(path, "sysu_mm01", "id file")
    tokens = [t for t in re.split(r"[,\s]+", text) if t]
    bad = [t for t in tokens if not (t.isdigit() and t.isascii())]
    if bad or not tokens:
        found = f"found {bad[0][:40]!r}" if bad else "found no id"
        raise DatasetError(f"sysu_mm01: {path} holds something other than integer ids "
                           f"({found}; expected one comma-separated line)",
                           "restore the exp/ files of the release")
    # person folders are named PPPP: ids above 9999 cannot name one
    return np.array(sorted({parse_number(t, "sysu_mm01", str(path), "id", 1, 9999)
                            for t in tokens}), dtype=np.int64)


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
                frame = parse_number(match.group(1), "sysu_mm01", str(person / name),
                                     "image number")
                rows.append({"path": person / name, "pid": int(pid), "camid": cam - 1,
                             "frame": frame, "modality": modality,
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


# -- the three draw families ---------------------------------------------------------------------
def seeded_draws(rel: np.ndarray, pids: np.ndarray, cams: np.ndarray, test_ids, mode: str,
                 shots: int, seed: int) -> list[list[str]]:
    """draws=seeded: the 10 galleries, per trial, test id and gallery camera ``shots`` images
    drawn without replacement by :func:`protocol_rng` (``rel``, ``pids``, ``cams``: (N,)
    relative paths, person ids and 1-based cameras of every record, sorted by path)."""
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


def perm_path(folder: Path, perm_file) -> Path:
    """The permutation file of draws=official: ``perm_file`` or ``<folder>/exp/
    rand_perm_cam.mat``; a missing file is a one-line :class:`DatasetError`."""
    path = Path(str(perm_file)).expanduser() if perm_file is not None else folder / PERM_FILE
    if not path.is_file():
        where = "" if perm_file is not None else f" (or pass {param('perm_file', 'PATH')})"
        raise DatasetError(f"sysu_mm01: {param('draws', 'official')} needs the official "
                           f"permutation file {path}, which does not exist",
                           f"copy {OFFICIAL_SOURCE} there{where}, or use "
                           f"{param('draws', 'seeded')} or {param('draws', 'agw')}")
    return path


def read_rand_perm(content: bytes, path: Path) -> dict[int, list[np.ndarray | None]]:
    """Parse the bytes of ``rand_perm_cam.mat`` (``path`` names it in messages).

    Returns camera (1..6) → per person id p the entry of ``rand_perm_cam{cam}{p}`` at list
    index p − 1: an int64 array (rows ≥ 10, n) of 0-based image indices, or None for an empty
    (10 × 0) entry. Structure: module doc.
    """
    def bad(what: str) -> DatasetError:
        return DatasetError(f"sysu_mm01: {path} {what}",
                            f"use the official file, {OFFICIAL_SOURCE}")

    try:
        mat = scipy.io.loadmat(io.BytesIO(content))
    except (MatReadError, ValueError, TypeError, NotImplementedError, OSError) as exc:
        raise bad(f"is not a readable MATLAB (v5) file ({exc})") from None
    if PERM_VARIABLE not in mat:
        found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
        raise bad(f"has no variable {PERM_VARIABLE!r} (variables: {found})")
    outer = mat[PERM_VARIABLE]
    if outer.dtype != object or outer.size != len(CAMERAS):
        raise bad(f"variable {PERM_VARIABLE} is not a cell of {len(CAMERAS)} cameras "
                  f"(shape {outer.shape})")
    out: dict[int, list[np.ndarray | None]] = {}
    for cam, cell in zip(CAMERAS, outer.ravel(order="F")):
        if not isinstance(cell, np.ndarray) or cell.dtype != object:
            raise bad(f"{PERM_VARIABLE}{{{cam}}} is not a cell of per-person permutations")
        entries: list[np.ndarray | None] = []
        for p, entry in enumerate(cell.ravel(order="F"), start=1):
            entry = np.asarray(entry)
            if entry.size == 0:
                entries.append(None)
                continue
            if entry.ndim != 2 or entry.shape[0] < NUM_TRIALS or entry.dtype.kind not in "uif" \
                    or not np.array_equal(entry, np.round(entry)):
                raise bad(f"{PERM_VARIABLE}{{{cam}}}{{{p}}} is not a {NUM_TRIALS} × n matrix "
                          f"of image indices (shape {entry.shape}, {entry.dtype})")
            entries.append(entry.astype(np.int64) - 1)      # MATLAB's 1-based → 0-based
        out[cam] = entries
    return out


def official_draws(rel: np.ndarray, pids: np.ndarray, cams: np.ndarray, test_ids, mode: str,
                   shots: int, perms: dict[int, list[np.ndarray | None]], path: Path,
                   folder: Path) -> list[list[str]]:
    """draws=official: gallery of trial t = for each test id and gallery camera the images
    named by the first ``shots`` entries of row t + 1 of that person's permutation
    (``rel``/``pids``/``cams`` as in :func:`seeded_draws`; ``perms`` from
    :func:`read_rand_perm` of the file ``path``). A permutation that does not cover exactly
    the images of the person's folder is a :class:`DatasetError`."""
    picks = [[] for _ in range(NUM_TRIALS)]
    for pid in test_ids:
        for cam in GALLERY_CAMERAS[mode]:
            options = np.flatnonzero((pids == pid) & (cams == cam))      # name order
            entries = perms[cam]
            entry = entries[pid - 1] if pid <= len(entries) else None
            width = 0 if entry is None else entry.shape[1]
            if width != len(options):
                raise DatasetError(
                    f"sysu_mm01: {path} permutes {width} image(s) of person {pid} in camera "
                    f"{cam}, but {folder / f'cam{cam}' / f'{pid:04d}'} holds {len(options)}",
                    "the permutations index the official release's images: restore that "
                    f"folder, or use {param('draws', 'seeded')}")
            if not width:
                continue
            for t in range(NUM_TRIALS):
                row = entry[t]
                if not np.array_equal(np.sort(row), np.arange(width)):
                    raise DatasetError(f"sysu_mm01: {path} row {t + 1} of person {pid} in "
                                       f"camera {cam} is not a permutation of 1..{width}",
                                       f"use the official file, {OFFICIAL_SOURCE}")
                picks[t].extend(options[row[:min(shots, width)]].tolist())
    return [rel[np.sort(np.asarray(p, dtype=np.int64))].tolist() for p in picks]


def agw_listings(folder: Path, test_ids, mode: str) -> dict[tuple[int, int], list[str]]:
    """``(pid, cam)`` → the sorted entry names of ``cam<k>/<PPPP>/`` for every test id and
    gallery camera with such a folder — AGW draws from every entry of the folder listing,
    not only the images, so an extra file changes its draws."""
    out = {}
    for pid in test_ids:
        for cam in GALLERY_CAMERAS[mode]:
            person = folder / f"cam{cam}" / f"{pid:04d}"
            if person.is_dir():
                out[(int(pid), cam)] = sorted(os.listdir(person))
    return out


def agw_draws(rel: np.ndarray, listings: dict[tuple[int, int], list[str]], test_ids,
              mode: str, folder: Path) -> list[list[str]]:
    """draws=agw: gallery of trial t = one ``random.Random(t).choice`` per test id (ascending)
    and gallery camera (ascending) over the folder listing of :func:`agw_listings` — the
    sequence of AGW's ``process_gallery_sysu(trial=t)``. An empty folder draws nothing; a
    draw that lands on a non-image entry is a :class:`DatasetError`."""
    row_of = {path: i for i, path in enumerate(rel)}
    out = []
    for t in range(NUM_TRIALS):
        rng = random.Random(t)
        chosen = []
        for pid in test_ids:
            for cam in GALLERY_CAMERAS[mode]:
                names = listings.get((int(pid), cam))
                if not names:
                    continue
                name = rng.choice(names)
                key = f"cam{cam}/{int(pid):04d}/{name}"
                if key not in row_of:
                    raise DatasetError(f"sysu_mm01: AGW's draw of trial {t} picks "
                                       f"{folder / key}, which is not an image",
                                       "remove the non-image files from the camera folders "
                                       f"(AGW draws among every entry), or use "
                                       f"{param('draws', 'seeded')}")
                chosen.append(row_of[key])
        out.append(rel[np.sort(np.asarray(chosen, dtype=np.int64))].tolist())
    return out


def resolve_draws(draws, folder: Path, perm_file, seed) -> str:
    """The draw family of ``draws=auto``: ``official`` when ``perm_file`` is given or
    ``<folder>/exp/rand_perm_cam.mat`` exists (unless a non-zero ``seed`` asks for the
    seeded draws), else ``seeded``; other values unchanged."""
    if draws != AUTO_DRAWS:
        return draws
    if perm_file is not None or (folder / PERM_FILE).is_file():
        if seed != 0:
            why = f"{param('perm_file')} is given" if perm_file is not None else \
                f"{folder / PERM_FILE} exists"
            raise UsageError(f"sysu_mm01: {param('seed', seed)} applies to "
                             f"{param('draws', 'seeded')} only, and the default draws are the "
                             f"official ones since {why}",
                             f"add {param('draws', 'seeded')}, or drop {param('seed')}")
        return "official"
    return "seeded"


def check_options(mode, shots, draws, seed, perm_file) -> tuple[str, int, str, int]:
    """``(mode, shots, draws, seed)`` in canonical form after checking every option:
    ParameterError for an unknown mode/draw family, a bad ``shots`` or ``seed``; UsageError
    for options that do not apply to the chosen draw family (``draws`` may still be
    ``auto``)."""
    mode = check_choice("sysu_mm01", "mode", mode, tuple(GALLERY_CAMERAS))
    shots = check_param("sysu_mm01", "shots", shots, Interval(int, 1, MAX_SHOTS))
    seed = check_seed("sysu_mm01", seed)
    draws = check_choice("sysu_mm01", "draws", draws, (AUTO_DRAWS,) + DRAWS)
    if draws == "agw" and shots != 1:
        raise UsageError(f"sysu_mm01: AGW's draws are single-shot only (one random.choice per "
                         f"id and camera), not {param('shots', shots)}",
                         f"use {param('shots', 1)}, or {param('draws', 'official')} / "
                         f"{param('draws', 'seeded')} for multi-shot")
    if draws not in ("seeded", AUTO_DRAWS) and seed != 0:
        raise UsageError(f"sysu_mm01: {param('seed', seed)} applies to "
                         f"{param('draws', 'seeded')} only; {param('draws', draws)} is fixed",
                         f"drop {param('seed')}")
    if draws not in ("official", AUTO_DRAWS) and perm_file is not None:
        raise UsageError(f"sysu_mm01: {param('perm_file')} applies to "
                         f"{param('draws', 'official')} only",
                         f"add {param('draws', 'official')} or drop {param('perm_file')}")
    return mode, int(shots), draws, int(seed)


def load_sysu_mm01(root=None, trial: int = 0, mode: str = "all", shots: int = 1,
                   train_includes_val: bool = True, seed: int = 0, draws: str = AUTO_DRAWS,
                   perm_file=None) -> DatasetSplit:
    """Load one SYSU-MM01 trial (gallery draw ``trial`` of 10, family ``draws``; ``auto``:
    official when the permutation file is present, else seeded)."""
    mode, shots, draws, seed = check_options(mode, shots, draws, seed, perm_file)
    train_includes_val = check_param("sysu_mm01", "train_includes_val", train_includes_val, BOOL)
    folder = resolve_dataset_dir("sysu_mm01", root)
    draws = resolve_draws(draws, folder, perm_file, seed)
    records, train_ids, test_ids = read_sysu(folder, train_includes_val)
    rel = np.asarray(relative_paths(records, folder), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64) + 1
    is_test = np.isin(pids, test_ids)
    train = rel[np.isin(pids, train_ids)].tolist()
    query = rel[is_test & np.isin(cams, IR_CAMERAS)].tolist()
    options = {"mode": mode, "shots": shots, "train_includes_val": train_includes_val,
               "draws": draws}
    fingerprint = rel.tolist()
    if draws == "seeded":
        options["seed"] = seed

        def galleries() -> list[list[str]]:
            return seeded_draws(rel, pids, cams, test_ids, mode, shots, seed)
    elif draws == "official":
        path = perm_path(folder, perm_file)
        content = path.read_bytes()
        digest = hashlib.sha1(content).hexdigest()
        options.update(perm_file=str(path), perm_sha1=digest)
        fingerprint.append(f"{PERM_VARIABLE} sha1 {digest}")   # another file → rebuilt

        def galleries() -> list[list[str]]:
            perms = read_rand_perm(content, path)
            return official_draws(rel, pids, cams, test_ids, mode, shots, perms, path, folder)
    else:
        listings = agw_listings(folder, test_ids, mode)
        fingerprint.extend(f"{key}: {'/'.join(names)}" for key, names in listings.items())

        def galleries() -> list[list[str]]:
            return agw_draws(rel, listings, test_ids, mode, folder)

    def build() -> list[Trial]:
        return [{"train": train, "query": query, "gallery": g} for g in galleries()]

    key = f"sysu_{draws}_{mode}_shots{shots}_val{int(train_includes_val)}" + \
        (f"_seed{seed}" if draws == "seeded" else "")
    trials = cached_trials(folder, key, build, fingerprint=fingerprint)
    return split_from_trial("sysu_mm01", records, trials, trial, folder,
                            protocol=f"{mode}_search_{shots}shot_{draws}", options=options,
                            eval_rule="sysu", eval_kwargs={"mode": mode, "shots": shots})


register(INFO, load_sysu_mm01, looks_like_sysu)
