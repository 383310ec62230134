"""Fake trees of the small two-view datasets: VIPeR, PRID450S, CUHK01, PRID2011, iLIDS,
CUHK02 (layout-exact, tiny)."""
from __future__ import annotations

import zipfile
from pathlib import Path

from tests.data.fake_trees import write_image


def viper(root: Path, persons: int = 8) -> Path:
    """``<root>/viper/VIPeR/cam_{a,b}/NNN_A.bmp`` with pair indices 000, 002, 004, ..."""
    folder = Path(root) / "viper" / "VIPeR"
    for i in range(persons):
        write_image(folder / "cam_a" / f"{2 * i:03d}_{45 * (i % 4)}.bmp")
        write_image(folder / "cam_b" / f"{2 * i:03d}_{90 + 45 * (i % 3)}.bmp")
    return folder


def prid450s(root: Path, persons: int = 8) -> Path:
    folder = Path(root) / "PRID450S"
    for i in range(1, persons + 1):
        for cam in ("cam_a", "cam_b"):
            write_image(folder / cam / f"img_{i:04d}.png")
            write_image(folder / cam / f"man_{i:04d}.png", mode="L")     # a mask: ignored
    return folder


def cuhk01(root: Path, persons: int = 10, zipped: bool = False) -> Path:
    """``<root>/cuhk01/campus/PPPPNNN.png`` (4 per id) or only ``cuhk01/CUHK01.zip``."""
    folder = Path(root) / "cuhk01"
    campus = folder / ("campus_src" if zipped else "campus")
    for p in range(1, persons + 1):
        for n in range(1, 5):
            write_image(campus / f"{p:04d}{n:03d}.png")
    if zipped:
        with zipfile.ZipFile(folder / "CUHK01.zip", "w") as zf:
            for f in sorted(campus.iterdir()):
                zf.write(f, f"campus/{f.name}")
        for f in campus.iterdir():
            f.unlink()
        campus.rmdir()
    return folder


def prid2011(root: Path, shared: int = 6, only_a: int = 2, only_b: int = 4) -> Path:
    """``prid_2011/single_shot/cam_a`` (shared + only_a), ``cam_b`` (shared + only_b)."""
    folder = Path(root) / "prid2011" / "prid_2011" / "single_shot"
    for i in range(1, shared + only_a + 1):
        write_image(folder / "cam_a" / f"person_{i:04d}.png")
    for i in range(1, shared + only_b + 1):
        write_image(folder / "cam_b" / f"person_{i:04d}.png")
    return folder


def ilids(root: Path, images_per_id=(2, 3, 4, 2, 5, 2, 3)) -> Path:
    folder = Path(root) / "ilids" / "i-LIDS_Pedestrian" / "Persons"
    for p, count in enumerate(images_per_id, start=1):
        for n in range(1, count + 1):
            write_image(folder / f"{p:04d}{n:03d}.jpg")
    return folder


def cuhk02(root: Path, ids_per_pair=(3, 2, 2, 2, 3)) -> Path:
    folder = Path(root) / "cuhk02" / "Dataset"
    for pair, count in enumerate(ids_per_pair, start=1):
        for cam in (1, 2):
            for i in range(1, count + 1):
                for k in (1, 2):
                    write_image(folder / f"P{pair}" / f"cam{cam}" / f"{i:03d}_{cam}{k}.png")
    return folder
