"""RegDB (docs/datasets.md, evaluation rule E5 ``regdb``).

Tree: ``Visible/<pid>/*.bmp``, ``Thermal/<pid>/*.bmp`` (pid folders 1..412, 10 + 10 images
each) and ``idx/{train,test}_{visible,thermal}_{t}.txt`` for t = 1..10, lines
``<relpath from the RegDB folder> <label>``. The idx files define the trials: loader trial
0..9 reads the files of t = 1..10. Records keep the folder number as ``pid`` (the files'
labels are renumbered 0..205 per file set and are kept in ``x_label``); camid 0 = visible,
1 = thermal (modality ``infrared``: thermal is far-IR); ``frame`` = the 5-digit index of
``{female|male}_{front|back}_{v|t}_{index}_{pid}.bmp`` when the name has that form.

Train = ``train_visible_t`` + ``train_thermal_t``; ``direction=v2t``: query =
``test_visible_t``, gallery = ``test_thermal_t``; ``t2v`` swaps them.
"""
from __future__ import annotations

import re
from pathlib import Path

from reidcli.data.datasets.common import read_text, rows_to_frame
from reidcli.data.trials import check_choice
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial
from reidcli.errors import DatasetError

NAME = re.compile(r"^(female|male)_(front|back)_([vt])_(\d{5})_(\d+)\.bmp$")
NUM_TRIALS = 10
#: modality → (folder of its images, camid, record modality)
MODALITIES = {"visible": ("Visible", 0, "visible"), "thermal": ("Thermal", 1, "infrared")}
DIRECTIONS = ("v2t", "t2v")

INFO = DatasetInfo(
    name="regdb", title="RegDB (Dongguk Body-based Person Recognition Database)",
    url="http://dm.dongguk.edu/link.html (\"Dongguk Body-based Person Recognition Database "
        "(DBPerson-Recog-DB1)\"; copyright/usage form required)",
    license="usage form required; no redistribution — reidcli never downloads it",
    tree="RegDB/   (or regdb/)\n"
         "  Visible/<pid>/*.bmp   Thermal/<pid>/*.bmp   (pid 1..412, 10 + 10 images each)\n"
         "  idx/train_visible_{1..10}.txt  train_thermal_{t}.txt  test_visible_{t}.txt  "
         "test_thermal_{t}.txt   (lines '<relpath> <label>', 2,060 each)",
    candidates=("RegDB", "regdb", "."),
    cameras="2 (visible, thermal)",
    counts={"train": (4120, 206), "query": (2060, 206), "gallery": (2060, 206)},
    options={"direction": "v2t"},
    protocol="10 trials = idx files 1..10; v2t: visible queries, thermal gallery "
             "(direction=t2v swaps)",
    eval_rule="regdb",
    notes=("trial 0..9 reads idx/*_{1..10}.txt",
           "pid = person folder number; x_label = the idx file's label (0..205)",
           "train = 2,060 visible + 2,060 thermal images of 206 ids"))


def looks_like_regdb(path: Path) -> bool:
    return (path / "idx").is_dir() and (path / "Visible").is_dir()


def read_index(path: Path, folder: Path, split: str, modality: str) -> list[dict]:
    """Record rows of one idx file (``modality`` visible | thermal); every listed image must
    exist inside the modality's folder, named by its person folder."""
    sub, camid, record_modality = MODALITIES[modality]
    rows = []
    for number, line in enumerate(read_text(path, "regdb", "idx file").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"regdb: {path} line {number}"
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit() or len(parts[1]) > 18:
            raise DatasetError(f"{where} is not '<relpath> <label>': {line.strip()!r}",
                               "restore the idx files of the release")
        rel = Path(parts[0].replace("\\", "/"))
        if len(rel.parts) != 3 or rel.parts[0] != sub or not rel.parts[1].isdigit() \
                or not rel.parts[1].isascii() or len(rel.parts[1]) > 9:
            raise DatasetError(f"{where}: {parts[0]} is not {sub}/<pid>/<name>.bmp",
                               f"{path.name} lists {modality} images only; restore the idx "
                               "files")
        image = folder / rel
        if not image.is_file():
            raise DatasetError(f"{where} lists {image}, which does not exist",
                               f"check the {sub}/ folder of the copy")
        match = NAME.match(rel.name)
        rows.append({"path": image, "pid": int(rel.parts[1]), "camid": camid,
                     "modality": record_modality, "split": split,
                     "frame": int(match.group(4)) if match else None,
                     "x_label": int(parts[1])})
    if not rows:
        raise DatasetError(f"regdb: {path} lists no image", "restore the idx files")
    return rows


def load_regdb(root=None, trial: int = 0, direction: str = "v2t") -> DatasetSplit:
    """Load RegDB trial ``trial`` (0..9 → idx files 1..10) in ``direction`` v2t | t2v."""
    direction = check_choice("regdb", "direction", direction, DIRECTIONS)
    trial = check_trial("regdb", trial, NUM_TRIALS, "RegDB protocol (idx files 1..10)")
    folder = resolve_dataset_dir("regdb", root)
    t = trial + 1
    idx = folder / "idx"
    train = read_index(idx / f"train_visible_{t}.txt", folder, "train", "visible") + \
        read_index(idx / f"train_thermal_{t}.txt", folder, "train", "thermal")
    first, second = ("query", "gallery") if direction == "v2t" else ("gallery", "query")
    visible = read_index(idx / f"test_visible_{t}.txt", folder, first, "visible")
    thermal = read_index(idx / f"test_thermal_{t}.txt", folder, second, "thermal")
    query, gallery = (visible, thermal) if direction == "v2t" else (thermal, visible)
    overlap = sorted({r["pid"] for r in train} & {r["pid"] for r in visible + thermal})
    if overlap:
        raise DatasetError(f"regdb: person {overlap[0]} is in both the train and the test idx "
                           f"files of trial {t} ({idx})", "restore the idx files")
    frames = {name: rows_to_frame(rows, "regdb") for name, rows in
              (("train", train), ("query", query), ("gallery", gallery))}
    return DatasetSplit(name="regdb", train=frames["train"], query=frames["query"],
                        gallery=frames["gallery"], eval_rule="regdb",
                        eval_kwargs={"direction": direction}, trial=int(trial),
                        num_trials=NUM_TRIALS, protocol=direction,
                        options={"direction": direction})


register(INFO, load_regdb, looks_like_regdb)
