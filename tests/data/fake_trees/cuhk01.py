"""Fake CUHK01 tree (docs/datasets.md): ``cuhk01/campus/PPPPNNN.png`` (4 images per person),
or only ``cuhk01/CUHK01.zip``."""
from __future__ import annotations

import zipfile
from pathlib import Path

from tests.data.fake_trees import write_image


def names(persons: int = 10) -> list[str]:
    """``0001001.png`` .. ``{persons:04d}004.png`` (images 001-002 view A, 003-004 view B)."""
    return [f"{p:04d}{n:03d}.png" for p in range(1, persons + 1) for n in range(1, 5)]


def build(root: Path, persons: int = 10, zipped: bool = False, wrapper: str = "cuhk01",
          inner: str = "campus") -> Path:
    """``<root>/<wrapper>/campus/*.png``; ``zipped=True`` writes only
    ``<root>/<wrapper>/CUHK01.zip`` whose members lie under ``<inner>/`` (``""``: at the top
    of the archive)."""
    folder = Path(root) / wrapper
    folder.mkdir(parents=True, exist_ok=True)
    if not zipped:
        for name in names(persons):
            write_image(folder / "campus" / name, size=(6, 16))
        return folder
    staging = folder / ".staging"
    with zipfile.ZipFile(folder / "CUHK01.zip", "w") as zf:
        for name in names(persons):
            path = write_image(staging / name, size=(6, 16))
            zf.write(path, f"{inner}/{name}" if inner else name)
            path.unlink()
    staging.rmdir()
    return folder
