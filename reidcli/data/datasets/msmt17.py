"""MSMT17 V1/V2 (datasets.md §5.3): images listed in ``list_{train,val,query,gallery}.txt``
(``<relpath> <label>``), relative to ``train/`` or ``test/`` (V2: ``mask_train_v2/``,
``mask_test_v2/``). Train and test labels both start at 0 and are different people
(``x_pid_scope`` train/test); pid 0 is reserved for distractors in reidcli, so records carry
``pid = label + 1`` and the list's label in ``x_native_pid``."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import require_dir, require_file, rows_to_frame
from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError, UsageError

NAME = re.compile(r"^(\d+)_(\d+)_(\d+)_([0-9a-z]+)_(\d+)_(\w+)\.jpe?g$", re.IGNORECASE)
FOLDERS = {"v1": ("train", "test"), "v2": ("mask_train_v2", "mask_test_v2")}
LISTS = (("list_train.txt", "train", 0), ("list_val.txt", "val", 0),
         ("list_query.txt", "query", 1), ("list_gallery.txt", "gallery", 1))

INFO = DatasetInfo(
    name="msmt17", title="MSMT17",
    url="http://www.pkuvmc.com/publications/msmt17.html (by e-mail request to the authors)",
    license="obtained by request from PKU; redistribution not allowed — reidcli never "
            "downloads it",
    tree="MSMT17_V1/ (or MSMT17_V2/ with mask_train_v2/, mask_test_v2/)\n"
         "  train/PPPP/*.jpg   test/PPPP/*.jpg\n"
         "  list_train.txt list_val.txt list_query.txt list_gallery.txt  (<relpath> <label>)",
    candidates=("msmt17/MSMT17_V1", "msmt17/MSMT17_V2", "MSMT17_V1", "MSMT17_V2",
                "MSMT17/MSMT17_V2", "msmt17", "."),
    cameras="15",
    counts={"query": (11659, 3060), "gallery": (82161, 3060)},
    options={"version": "auto", "train_includes_val": False},
    notes=("train = list_train.txt (torchreid convention); with train_includes_val=True "
           "train+val = 32,621 images / 1,041 ids",
           "pid = list label + 1 (pid 0 is reserved); x_native_pid keeps the label"),
    unconfirmed=("the split of the 32,621 training images into list_train/list_val lines",
                 "meaning of the name tokens beyond the camera",
                 "V2 copies with .jpeg names or _ex files (a missing .jpg is retried as .jpeg)"))


def _version(folder: Path, version: str) -> str:
    if version not in ("auto", "v1", "v2"):
        raise UsageError(f"msmt17 option version={version!r}", "use version=auto, v1 or v2")
    if version != "auto":
        return version
    return "v1" if (folder / "train").is_dir() else "v2"


def read_list(list_path: Path, image_dir: Path, split: str, scope: str) -> pd.DataFrame:
    """Records of one list file; every listed image must exist (``.jpg``↔``.jpeg`` once)."""
    require_file(list_path, "msmt17")
    rows = []
    for number, line in enumerate(list_path.read_text().splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise DatasetError(f"msmt17: {list_path} line {number} is not '<relpath> <label>'",
                               "restore the list file from the MSMT17 archive")
        rel, label = parts[0], int(parts[1])
        path = image_dir / rel
        if not path.is_file():
            swapped = path.with_suffix(".jpeg" if path.suffix.lower() == ".jpg" else ".jpg")
            if not swapped.is_file():
                raise DatasetError(f"msmt17: {list_path} line {number} lists {path}, which "
                                   "does not exist", "check the image folders of the copy")
            path = swapped
        match = NAME.match(path.name)
        if match is None:
            raise DatasetError(f"msmt17: malformed image name {path}",
                               "expected PPPP_NNN_CC_DDDDtod_FFFF_K.jpg")
        if int(match.group(1)) != label or Path(rel).parts[0].lstrip("0") != \
                str(label).lstrip("0"):
            raise DatasetError(f"msmt17: {list_path} line {number}: label {label} does not "
                               f"match the person folder/name of {rel}",
                               "restore the list file from the MSMT17 archive")
        rows.append({"path": path, "pid": label + 1, "camid": int(match.group(3)) - 1,
                     "split": split, "frame": int(match.group(5)),
                     "x_native_pid": label, "x_pid_scope": scope,
                     "x_date_time": match.group(4)})
    return rows_to_frame(rows, "msmt17")


def load_msmt17(root=None, trial: int = 0, version: str = "auto",
                train_includes_val: bool = False) -> DatasetSplit:
    """Load MSMT17 (one fixed split; eval rule E1)."""
    folder = resolve_dataset_dir("msmt17", root)
    version = _version(folder, version)
    dirs = [require_dir(folder / d, "msmt17") for d in FOLDERS[version]]
    parts = {split: read_list(folder / name, dirs[which], split,
                              "train" if which == 0 else "test")
             for name, split, which in LISTS}
    train, val = parts["train"], parts["val"]
    if train_includes_val:
        both = pd.concat([train, val.assign(split="train")], ignore_index=True)
        train, val = normalize_frame(both.sort_values("path").reset_index(drop=True)), \
            empty_frame()
    return DatasetSplit(name="msmt17", train=train, val=val, query=parts["query"],
                        gallery=parts["gallery"], eval_rule="market", protocol="standard",
                        options={"version": version, "train_includes_val": train_includes_val})


register(INFO, load_msmt17, lambda p: (p / "list_query.txt").is_file())
