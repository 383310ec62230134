"""MSMT17 V1/V2 (docs/datasets.md).

The images are listed in ``list_{train,val,query,gallery}.txt`` (``<relpath> <label>`` per
line), relative to ``train/`` (train, val lists) or ``test/`` (query, gallery lists); V2 names
those folders ``mask_train_v2/`` and ``mask_test_v2/``. Image name tokens
``PPPP_NNN_CC_DDDDtod_FFFF_K.jpg``: camid = CC - 1, frame = FFFF, ``x_date_time`` = DDDDtod.

Train and test labels both start at 0 and are different people (``x_pid_scope`` ``train`` /
``test``, docs/datasets.md). pid 0 means "distractor" everywhere in reidcli (evaluation skips
such queries, training drops them), so records carry ``pid = label + 1`` and keep the list's
label in ``x_native_pid``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import require_dir, require_file, rows_to_frame
from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.data.registry import DatasetInfo, data_root, register, resolve_dataset_dir
from reidcli.data.splits import check_trial
from reidcli.data.trials import check_choice
from reidcli.errors import DatasetError

#: PPPP_NNN_CC_DDDDtod_FFFF_K.jpg (K may carry a suffix such as ``_ex`` in some V2 copies)
NAME = re.compile(r"^(\d+)_(\d+)_(\d+)_([^_]+)_(\d+)_(.+)\.jpe?g$", re.IGNORECASE)
#: image folders (train side, test side) per version
FOLDERS = {"v1": ("train", "test"), "v2": ("mask_train_v2", "mask_test_v2")}
#: list file, split, side (0 = train folder, 1 = test folder)
LISTS = (("list_train.txt", "train", 0), ("list_val.txt", "val", 0),
         ("list_query.txt", "query", 1), ("list_gallery.txt", "gallery", 1))
VERSIONS = ("auto", "v1", "v2")

INFO = DatasetInfo(
    name="msmt17", title="MSMT17",
    url="http://www.pkuvmc.com/publications/msmt17.html (offline in practice; the archive is "
        "obtained by e-mail request to the authors at PKU)",
    license="obtained by request from PKU; redistribution not allowed — reidcli never "
            "downloads it",
    tree="msmt17/MSMT17_V1/   (or MSMT17_V1/, MSMT17_V2/, msmt17/MSMT17_V2/, MSMT17/MSMT17_V2/)\n"
         "  train/PPPP/PPPP_NNN_CC_DDDDtod_FFFF_K.jpg   (V2: mask_train_v2/)\n"
         "  test/PPPP/*.jpg                              (V2: mask_test_v2/)\n"
         "  list_train.txt  list_val.txt    (<relpath under train/> <label>)\n"
         "  list_query.txt  list_gallery.txt (<relpath under test/> <label>)\n"
         "  [posture.txt]   (V2 only, unused)",
    candidates=("msmt17/MSMT17_V1", "msmt17/MSMT17_V2", "MSMT17_V1", "MSMT17_V2",
                "MSMT17/MSMT17_V1", "MSMT17/MSMT17_V2", "msmt17", "MSMT17", "."),
    cameras="15",
    # default train = list_train.txt only, whose size is unconfirmed (≈30,248 images); with
    # train_includes_val=True train is 32,621 / 1,041 (docs/datasets.md)
    counts={"query": (11659, 3060), "gallery": (82161, 3060)},
    options={"version": "auto", "train_includes_val": False},
    protocol="standard (train = list_train.txt, val = list_val.txt; version auto = V1 if "
             "present, else V2)",
    notes=("train = list_train.txt (torchreid convention); with train_includes_val=True "
           "train = train + val = 32,621 images / 1,041 ids; reid train pcb|bot default to "
           "train_includes_val=True (docs/methods/pcb.md; option train_includes_val=false opts out)",
           "pid = list label + 1 (pid 0 is reserved for distractors); x_native_pid keeps the "
           "label, x_pid_scope = train|test (train and test labels both start at 0)",
           "a listed .jpg that is missing is retried once as .jpeg (and vice versa)"),
    unconfirmed=("MSMT17: how the 32,621 training images split into list_train/list_val lines "
                 "(≈30,248 / 2,373); `check` prints both",
                 "MSMT17: meaning of the name tokens beyond the camera (date, frame, box)",
                 "MSMT17: V2 copies with .jpeg names or _ex files (a missing listed .jpg is "
                 "retried as .jpeg)",
                 "MSMT17: 12 outdoor / 3 indoor cameras"))


def looks_valid(folder: Path) -> bool:
    """Whether ``folder`` holds an MSMT17 copy (any list file or image folder of V1/V2).

    Lenient on purpose: a copy that lacks one piece still resolves, so the loader can name
    the exact missing file or folder.
    """
    folder = Path(folder)
    return any((folder / name).is_file() for name, _, _ in LISTS) and any(
        (folder / d).is_dir() for pair in FOLDERS.values() for d in pair)


def _has_version(folder: Path, version: str) -> bool:
    return any((folder / d).is_dir() for d in FOLDERS[version])


def find_folder(root=None, version: str = "auto") -> tuple[Path, str]:
    """The dataset folder and the version to read (``auto``: V1 if any candidate has it)."""
    version = check_choice("msmt17", "version", version, VERSIONS)
    base = data_root(root)
    valid = []
    for cand in INFO.candidates:
        path = base / cand if cand != "." else base
        if path.is_dir() and looks_valid(path) and path not in valid:
            valid.append(path)
    if not valid:      # the registry's "tried ..." error
        valid.append(resolve_dataset_dir("msmt17", root))
    wanted = ("v1", "v2") if version == "auto" else (version,)
    for ver in wanted:
        for path in valid:
            if _has_version(path, ver):
                return path, ver
    # no candidate has the requested image folders: report them missing in the first copy
    ver = "v1" if version == "auto" else version
    require_dir(valid[0] / FOLDERS[ver][0], "msmt17")
    raise AssertionError("unreachable")  # pragma: no cover


def _resolve_image(image_dir: Path, rel: str, list_path: Path, number: int) -> Path:
    path = image_dir / rel
    if path.is_file():
        return path
    suffix = path.suffix.lower()
    if suffix in (".jpg", ".jpeg"):
        swapped = path.with_suffix(".jpeg" if suffix == ".jpg" else ".jpg")
        if swapped.is_file():
            return swapped
    raise DatasetError(f"msmt17: {list_path} line {number} lists {path}, which does not exist "
                       "(also tried .jpg/.jpeg)", "restore the image folders of the copy")


def read_list(list_path: Path, image_dir: Path, split: str, scope: str) -> pd.DataFrame:
    """Record table of one list file.

    Lines are ``<relpath> <label>`` split on whitespace (trailing spaces, CRLF and blank lines
    are tolerated). The label must equal the person folder and the name's first token; every
    listed image must exist (a missing ``.jpg`` is retried once as ``.jpeg`` and vice versa).
    """
    require_file(list_path, "msmt17")
    bad_line = "restore the list file from the MSMT17 archive"
    rows = []
    text = list_path.read_text(encoding="utf-8-sig", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isdigit():
            raise DatasetError(f"msmt17: {list_path} line {number} is not '<relpath> <label>': "
                               f"{line.strip()!r}", bad_line)
        rel, label = parts[0], int(parts[1])
        match = NAME.match(Path(rel).name)
        if match is None:
            raise DatasetError(f"msmt17: {list_path} line {number}: malformed image name "
                               f"{rel!r}", "expected PPPP_NNN_CC_DDDDtod_FFFF_K.jpg")
        folder_pid = Path(rel).parts[0] if len(Path(rel).parts) > 1 else ""
        if not folder_pid.isdigit() or int(folder_pid) != label or int(match.group(1)) != label:
            raise DatasetError(f"msmt17: {list_path} line {number}: label {label} does not "
                               f"match the person folder/name of {rel}", bad_line)
        cam = int(match.group(3))
        if cam < 1:
            raise DatasetError(f"msmt17: {list_path} line {number}: camera {cam} in {rel}",
                               "cameras are numbered 01..15")
        path = _resolve_image(image_dir, rel, list_path, number)
        rows.append({"path": path, "pid": label + 1, "camid": cam - 1, "split": split,
                     "frame": int(match.group(5)), "x_native_pid": label,
                     "x_pid_scope": scope, "x_date_time": match.group(4)})
    if not rows:
        raise DatasetError(f"msmt17: {list_path} lists no image", bad_line)
    return rows_to_frame(rows, "msmt17")


def load_msmt17(root=None, trial: int = 0, version: str = "auto",
                train_includes_val: bool = False) -> DatasetSplit:
    """Load MSMT17 (one fixed split; eval rule E1)."""
    check_trial("msmt17", trial, 1, "standard split")
    folder, version = find_folder(root, version)
    dirs = [require_dir(folder / d, "msmt17") for d in FOLDERS[version]]
    parts = {split: read_list(folder / name, dirs[side], split, ("train", "test")[side])
             for name, split, side in LISTS}
    train, val = parts["train"], parts["val"]
    if train_includes_val:
        both = pd.concat([train, val.assign(split="train")], ignore_index=True)
        train = normalize_frame(both.sort_values("path", kind="stable").reset_index(drop=True))
        val = empty_frame()
    return DatasetSplit(name="msmt17", train=train, val=val, query=parts["query"],
                        gallery=parts["gallery"], eval_rule="market", protocol="standard",
                        options={"version": version,
                                 "train_includes_val": bool(train_includes_val)})


register(INFO, load_msmt17, looks_valid)
