"""Fake RegDB tree (docs/datasets.md): ``Visible/<pid>/*.bmp``, ``Thermal/<pid>/*.bmp`` and
the idx files of two trials (``idx/{train,test}_{visible,thermal}_{1,2}.txt``, lines
``<relpath> <label>`` with labels renumbered 0.. per file set; trial 2's files use CRLF)."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

PERSONS = (1, 2, 3, 4)
#: t → (train pids, test pids)
TRIALS = {1: ((1, 2), (3, 4)), 2: ((3, 4), (1, 2))}
IMAGES_PER_PERSON = 2


def image_relpath(pid: int, modality: str, k: int) -> str:
    """e.g. ``Visible/3/female_back_v_00031_3.bmp`` (index = pid*10 + k)."""
    sex, side = ("male", "front") if pid % 2 else ("female", "back")
    sub, letter = ("Visible", "v") if modality == "visible" else ("Thermal", "t")
    return f"{sub}/{pid}/{sex}_{side}_{letter}_{pid * 10 + k:05d}_{pid}.bmp"


def build(root: Path, folder_name: str = "RegDB") -> Path:
    folder = Path(root) / folder_name
    for pid in PERSONS:
        for modality in ("visible", "thermal"):
            for k in range(IMAGES_PER_PERSON):
                write_image(folder / image_relpath(pid, modality, k),
                            mode="RGB" if modality == "visible" else "L")
    (folder / "idx").mkdir(parents=True)
    for t, (train, test) in TRIALS.items():
        newline = "\n" if t == 1 else "\r\n"
        for part, ids in (("train", train), ("test", test)):
            for modality in ("visible", "thermal"):
                lines = [f"{image_relpath(pid, modality, k)} {label}"
                         for label, pid in enumerate(ids) for k in range(IMAGES_PER_PERSON)]
                (folder / "idx" / f"{part}_{modality}_{t}.txt").write_bytes(
                    (newline.join(lines) + newline).encode())
    return folder
