"""RegDB (datasets.md §5.12, eval E5): ``Visible/<pid>/*.bmp``, ``Thermal/<pid>/*.bmp`` and
``idx/{train,test}_{visible,thermal}_{t}.txt`` (t = 1..10, lines ``<relpath> <label>``).
Records keep the folder number as ``pid`` and the file's label in ``x_label``."""
from __future__ import annotations

import re
from pathlib import Path

from reidcli.data.datasets.common import require_file, rows_to_frame
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError, UsageError

NAME = re.compile(r"^(female|male)_(front|back)_([vt])_(\d{5})_(\d+)\.bmp$")
NUM_TRIALS = 10

INFO = DatasetInfo(
    name="regdb", title="RegDB (Dongguk Body-based Person Recognition Database)",
    url="http://dm.dongguk.edu/link.html (DBPerson-Recog-DB1; copyright/usage form required)",
    license="usage form required; no redistribution — reidcli never downloads it",
    tree="RegDB/\n  Visible/<pid>/*.bmp   Thermal/<pid>/*.bmp   (412 ids × 10 + 10)\n"
         "  idx/train_visible_{1..10}.txt  train_thermal_*  test_visible_*  test_thermal_*",
    candidates=("RegDB", "regdb", "."),
    cameras="2 (visible, thermal)",
    counts={"train": (4120, 206), "query": (2060, 206), "gallery": (2060, 206)},
    options={"direction": "v2t"},
    protocol="10 trials (idx files 1..10); v2t: visible queries, thermal gallery",
    eval_rule="regdb")


def read_index(path: Path, folder: Path, split: str, modality: str) -> list[dict]:
    """Rows of one idx file; pid from the path's person folder."""
    require_file(path, "regdb")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isdigit():
            raise DatasetError(f"regdb: {path} line {number} is not '<relpath> <label>'",
                               "restore the idx files of the release")
        image = folder / parts[0]
        if not image.is_file():
            raise DatasetError(f"regdb: {path} line {number} lists {image}, which does not "
                               "exist", "check the Visible/ and Thermal/ folders")
        person = Path(parts[0]).parts
        if len(person) < 3 or not person[1].isdigit():
            raise DatasetError(f"regdb: {path} line {number}: {parts[0]} is not "
                               "<Visible|Thermal>/<pid>/<name>", "restore the idx files")
        match = NAME.match(image.name)
        rows.append({"path": image, "pid": int(person[1]), "camid": 0 if modality ==
                     "visible" else 1, "modality": modality, "split": split,
                     "frame": int(match.group(4)) if match else None,
                     "x_label": int(parts[1])})
    return rows


def load_regdb(root=None, trial: int = 0, direction: str = "v2t") -> DatasetSplit:
    """Load RegDB trial ``trial`` (0..9 → idx files 1..10)."""
    if direction not in ("v2t", "t2v"):
        raise UsageError(f"regdb option direction={direction!r}", "use direction=v2t or t2v")
    if not 0 <= trial < NUM_TRIALS:
        raise DatasetError(f"regdb has trials 0..9, not {trial}", "pass a trial in that range")
    folder = resolve_dataset_dir("regdb", root)
    t = trial + 1
    idx = folder / "idx"
    train = read_index(idx / f"train_visible_{t}.txt", folder, "train", "visible") + \
        read_index(idx / f"train_thermal_{t}.txt", folder, "train", "infrared")
    visible = read_index(idx / f"test_visible_{t}.txt", folder, "query", "visible")
    thermal = read_index(idx / f"test_thermal_{t}.txt", folder, "gallery", "infrared")
    if direction == "t2v":
        visible = [{**r, "split": "gallery"} for r in visible]
        thermal = [{**r, "split": "query"} for r in thermal]
        visible, thermal = thermal, visible
    return DatasetSplit(name="regdb", train=rows_to_frame(train, "regdb"),
                        query=rows_to_frame(visible, "regdb"),
                        gallery=rows_to_frame(thermal, "regdb"), eval_rule="regdb",
                        trial=trial, num_trials=NUM_TRIALS, protocol=direction,
                        options={"direction": direction})


register(INFO, load_regdb, lambda p: (p / "idx").is_dir() and (p / "Visible").is_dir())
