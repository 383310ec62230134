"""Fake SYSU-MM01, RegDB and Person30K trees."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image


def sysu(root: Path) -> Path:
    """6 cameras; train ids 1, 2; val id 3; test ids 4-7 (4 test ids as in datasets.md §7)."""
    folder = Path(root) / "SYSU-MM01"
    seen = {1: (1, 3, 4), 2: (2, 6), 3: (1, 3), 4: (1, 2, 3, 4, 5, 6), 5: (1, 2, 3),
            6: (4, 6), 7: (2, 5, 6)}
    for pid, cams in seen.items():
        for cam in cams:
            for n in range(1, 4):
                write_image(folder / f"cam{cam}" / f"{pid:04d}" / f"{n:04d}.jpg",
                            mode="L" if cam in (3, 6) else "RGB")
    (folder / "exp").mkdir()
    (folder / "exp" / "train_id.txt").write_text("1,2")
    (folder / "exp" / "val_id.txt").write_text("3\n")
    (folder / "exp" / "test_id.txt").write_text("4,5,6,7")
    (folder / "exp" / "available_id.txt").write_text("1,2,3,4,5,6,7")
    return folder


def regdb(root: Path, persons=(1, 2, 3, 4), trials=(1, 2)) -> Path:
    folder = Path(root) / "RegDB"
    files = {}
    for pid in persons:
        for mod, letter in (("Visible", "v"), ("Thermal", "t")):
            files[(pid, mod)] = []
            for k in range(2):
                rel = f"{mod}/{pid}/male_front_{letter}_{pid * 10 + k:05d}_{pid}.bmp"
                write_image(folder / rel)
                files[(pid, mod)].append(rel)
    (folder / "idx").mkdir()
    for t in trials:
        train, test = persons[:2] if t == 1 else persons[2:], persons[2:] if t == 1 else \
            persons[:2]
        for part, ids in (("train", train), ("test", test)):
            for mod in ("Visible", "Thermal"):
                lines = [f"{rel} {label}" for label, pid in enumerate(ids)
                         for rel in files[(pid, mod)]]
                (folder / "idx" / f"{part}_{mod.lower()}_{t}.txt").write_text(
                    "\n".join(lines) + "\n")
    return folder


def person30k(root: Path) -> Path:
    folder = Path(root) / "person30k"
    rows = ["path,pid,camid,site,scenario,subset"]
    layout = [("train", 1, 0), ("train", 1, 1), ("train", 2, 3),
              ("test_a", 10, 0), ("test_a", 10, 0), ("test_a", 10, 2), ("test_a", 11, 5),
              ("test_b", 20, 1), ("test_b", 20, 2)]
    for i, (subset, pid, cam) in enumerate(layout):
        rel = f"images/{subset}/{pid:05d}_{cam}_{i}.jpg"
        write_image(folder / rel)
        rows.append(f"{rel},{pid},{cam},site{pid % 3},supermarket,{subset}")
    (folder / "manifest.csv").write_text("\n".join(rows) + "\n")
    return folder
