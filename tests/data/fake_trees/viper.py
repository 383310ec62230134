"""Fake VIPeR tree (docs/datasets.md): ``cam_a/``, ``cam_b/`` with ``NNN_A.bmp``."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image


def build(root: Path, persons: int = 8, wrapper: bool = True) -> Path:
    """``<root>/viper/VIPeR/cam_{a,b}/NNN_A.bmp`` (``wrapper=False``: ``<root>/VIPeR/``).

    Pair indices are 000, 002, 004, ... (not contiguous, starting at 000 like the release);
    cam_a angles cycle 0/45/90/135, cam_b angles 90/135/180.
    """
    folder = Path(root) / ("viper/VIPeR" if wrapper else "VIPeR")
    for i in range(persons):
        write_image(folder / "cam_a" / f"{2 * i:03d}_{45 * (i % 4)}.bmp", size=(4, 8))
        write_image(folder / "cam_b" / f"{2 * i:03d}_{90 + 45 * (i % 3)}.bmp", size=(4, 8))
    return folder
