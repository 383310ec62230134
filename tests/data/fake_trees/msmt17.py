"""Fake MSMT17 trees (V1: train/ test/; V2: mask_train_v2/ mask_test_v2/) with list files."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image


def build(root: Path, version: str = "v1") -> Path:
    folder = Path(root) / "msmt17" / ("MSMT17_V1" if version == "v1" else "MSMT17_V2")
    train_dir, test_dir = ("train", "test") if version == "v1" else ("mask_train_v2",
                                                                       "mask_test_v2")
    lists = {"list_train.txt": [], "list_val.txt": [], "list_query.txt": [],
             "list_gallery.txt": []}
    for pid, cams in ((0, (1, 3)), (1, (2, 15))):
        for k, cam in enumerate(cams):
            rel = f"{pid:04d}/{pid:04d}_{k:03d}_{cam:02d}_0303morning_{15 + k:04d}_0.jpg"
            write_image(folder / train_dir / rel)
            lists["list_val.txt" if (pid, k) == (1, 1) else "list_train.txt"].append(
                f"{rel} {pid}")
    for pid, cams in ((0, (4, 5, 6)), (1, (7, 8))):
        for k, cam in enumerate(cams):
            rel = f"{pid:04d}/{pid:04d}_{k:03d}_{cam:02d}_0113noon_{40 + k:04d}_1.jpg"
            write_image(folder / test_dir / rel)
            lists["list_query.txt" if k == 0 else "list_gallery.txt"].append(f"{rel} {pid}")
    for name, lines in lists.items():
        # trailing spaces, CRLF and a blank last line, as some copies have
        (folder / name).write_text("".join(f"{line} \r\n" for line in lines) + "\n")
    return folder
