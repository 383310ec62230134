"""Fake MSMT17 trees (docs/datasets.md): V1 (``train/``, ``test/``) or V2
(``mask_train_v2/``, ``mask_test_v2/``, ``posture.txt``) with the four list files.

Content (labels as in the lists; records carry pid = label + 1):
* train side: label 0 → cams 1, 3 (both list_train); label 1 → cam 2 (list_train) and cam 15
  (list_val); label 2 → cam 5 (list_val). So list_train 3 lines, list_val 2 lines.
* test side: label 0 → cams 4 (query), 5, 6 (gallery); label 1 → cams 7 (query), 8 (gallery).
The list files end lines with a trailing space and CRLF and have a blank last line.
"""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

TRAIN = ((0, 1, "list_train.txt", "0303morning", 15), (0, 3, "list_train.txt", "0303noon", 16),
         (1, 2, "list_train.txt", "0302afternoon", 7),
         (1, 15, "list_val.txt", "0113morning", 8), (2, 5, "list_val.txt", "0114noon", 21))
TEST = ((0, 4, "list_query.txt", 40), (0, 5, "list_gallery.txt", 41),
        (0, 6, "list_gallery.txt", 42), (1, 7, "list_query.txt", 43),
        (1, 8, "list_gallery.txt", 44))


def build(root: Path, version: str = "v1", wrapper: bool = True, jpeg: bool = False) -> Path:
    """Write the tree under ``root/msmt17/MSMT17_Vx`` (``wrapper``) or ``root/MSMT17_Vx``.

    ``jpeg``: store the first gallery image as ``.jpeg`` while its list line says ``.jpg``
    (as some V2 copies do).
    """
    name = "MSMT17_V1" if version == "v1" else "MSMT17_V2"
    folder = Path(root) / ("msmt17" if wrapper else "") / name
    train_dir, test_dir = ("train", "test") if version == "v1" else ("mask_train_v2",
                                                                       "mask_test_v2")
    lists: dict[str, list[str]] = {"list_train.txt": [], "list_val.txt": [],
                                   "list_query.txt": [], "list_gallery.txt": []}
    counter: dict[tuple[str, int], int] = {}
    for side, rows in ((train_dir, TRAIN),
                       (test_dir, [(p, c, li, "0113noon", f) for p, c, li, f in TEST])):
        for label, cam, list_name, date_time, frame in rows:
            k = counter.get((side, label), 0)
            counter[(side, label)] = k + 1
            rel = f"{label:04d}/{label:04d}_{k:03d}_{cam:02d}_{date_time}_{frame:04d}_{k % 2}.jpg"
            target = folder / side / rel
            if jpeg and list_name == "list_gallery.txt" and not lists[list_name]:
                target = target.with_suffix(".jpeg")
            write_image(target)
            lists[list_name].append(f"{rel} {label}")
    for list_name, lines in lists.items():
        # trailing spaces, CRLF and a blank last line, as some copies have
        (folder / list_name).write_bytes(
            ("".join(f"{line} \r\n" for line in lines) + "  \r\n").encode())
    if version == "v2":
        (folder / "posture.txt").write_text("0000_000_01_0303morning_0015_0.jpg 1\n")
    return folder
