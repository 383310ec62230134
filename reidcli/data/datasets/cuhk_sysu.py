"""CUHK-SYSU person crops (docs/datasets.md): ``cuhksysu/cropped_images/p<pid>_<...>.<jpg|png>``.

CUHK-SYSU is a person-*search* benchmark (whole scene images with boxes); the re-ID community
trains on person crops cut from it, one folder ``cropped_images/`` of images named
``p<pid>_s<scene>[_<k>].jpg`` (or ``p<pid>_n<k>.png`` in some copies). The crops are a
training-only source (the DG "Mixed A" benchmark, docs/datasets.md): every image is ``train``,
query and gallery are empty.

Records: ``pid`` = the number after ``p`` (a negative number, as some copies name unlabelled
boxes, becomes ``-1`` = junk, which never trains); ``x_scene`` = the number of a leading
``s<scene>`` token when present. CUHK-SYSU has **no camera labels**: every record gets
``camid = 0`` and the extra column ``x_no_camera_labels = True`` (:data:`NO_CAMERA_COLUMN`);
DG training (:func:`reidcli.training.sources.multi_source_records`) gives such a source two
pseudo-cameras per identity (docs/datasets.md, "DG training compositions").
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import require_dir, rows_to_frame, scan_folder
from reidcli.data.records import DatasetSplit, empty_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial
from reidcli.errors import DatasetError

#: folder of the person crops inside the dataset folder
CROPS = "cropped_images"
#: ``p<pid>_<rest>.<jpg|jpeg|png>``; the rest may start with ``s<scene>``
NAME = re.compile(r"^p(-?\d+)_([^/]*)\.(?:jpe?g|png)$", re.IGNORECASE)
SCENE = re.compile(r"^s(\d+)(?:_|$)")
#: extra record column telling that the dataset has no camera labels (camid is always 0)
NO_CAMERA_COLUMN = "x_no_camera_labels"

INFO = DatasetInfo(
    name="cuhksysu", title="CUHK-SYSU person crops",
    aliases=("cuhk_sysu", "cuhk-sysu"),
    url="http://www.ee.cuhk.edu.hk/~xgwang/PS/dataset.html (person-search release, Xiao et "
        "al., CVPR 2017); the cropped_images/ folder is cut from it by the user, it is not "
        "part of the release",
    license="research use only, obtained from the authors' page; no redistribution — "
            "reidcli never downloads it",
    tree="cuhksysu/   (or cuhk_sysu/, CUHK-SYSU/, cuhk-sysu/)\n"
         "  cropped_images/   one image per labelled person box, names p<pid>_s<scene>[_<k>].jpg\n"
         "                    (also accepted: p<pid>_<...>.png)",
    candidates=("cuhksysu", "cuhk_sysu", "CUHK-SYSU", "cuhk-sysu", "."),
    cameras="none (camid 0; pseudo-cameras in DG training)",
    counts={"train": (34574, 11934)},
    options={},
    protocol="train_only (every crop is a training image; no query/gallery)",
    notes=("no camera labels: camid 0 and x_no_camera_labels = True on every record; "
           "DG training assigns two pseudo-cameras per identity",
           "a training-only source (DG Mixed A); query and gallery are empty",
           "x_scene = the scene number of an s<scene> name token"),
    unconfirmed=("the crop set and its file names are community-made (not in the "
                 "release); expected counts 34,574 images / 11,934 ids are those DG papers "
                 "print for Mixed A",
                 "what a negative p<pid> number in a crop name means (read as "
                 "junk, pid -1)"))


def looks_like_cuhk_sysu(path: Path) -> bool:
    return (path / CROPS).is_dir()


def _row(match: re.Match, path: Path) -> dict:
    pid = int(match.group(1))
    scene = SCENE.match(match.group(2))
    return {"path": path, "pid": pid if pid >= 0 else -1, "camid": 0,
            "x_scene": int(scene.group(1)) if scene else -1, NO_CAMERA_COLUMN: True}


def read_cuhk_sysu(folder: Path) -> pd.DataFrame:
    """Every crop of ``folder/cropped_images`` as a record table sorted by path ([N] rows)."""
    crops = require_dir(Path(folder) / CROPS, "cuhksysu")
    rows = scan_folder(crops, NAME, "cuhksysu", _row)
    if not rows:
        raise DatasetError(f"cuhksysu: no image in {crops}",
                           "copy the person crops p<pid>_s<scene>.jpg into it")
    return rows_to_frame(rows, "cuhksysu")


def load_cuhk_sysu(root=None, trial: int = 0) -> DatasetSplit:
    """Load the CUHK-SYSU crops: every image is ``train`` (one trial, 0)."""
    check_trial("cuhksysu", trial, 1, "dataset")
    folder = resolve_dataset_dir("cuhksysu", root)
    return DatasetSplit(name="cuhksysu", train=read_cuhk_sysu(folder), query=empty_frame(),
                        gallery=empty_frame(), eval_rule="market", trial=0, num_trials=1,
                        protocol="train_only", options={"camera_labels": False})


register(INFO, load_cuhk_sysu, looks_like_cuhk_sysu)
