"""Fake QMUL iLIDS tree (docs/datasets.md): ``i-LIDS_Pedestrian/Persons/PPPPNNN.jpg``."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

#: images per person 0001, 0002, ...; person 0006 has a single image (never a test id)
IMAGES_PER_ID = (2, 3, 4, 2, 5, 1, 3, 2, 4)


def build(root: Path, images_per_id=IMAGES_PER_ID, wrapper: bool = True) -> Path:
    """``<root>/ilids/i-LIDS_Pedestrian/Persons/`` (``wrapper=False``:
    ``<root>/i-LIDS_Pedestrian/Persons/``) with ``images_per_id[k]`` images of person k+1."""
    folder = Path(root) / ("ilids/i-LIDS_Pedestrian/Persons" if wrapper
                           else "i-LIDS_Pedestrian/Persons")
    for p, count in enumerate(images_per_id, start=1):
        for n in range(1, count + 1):
            write_image(folder / f"{p:04d}{n:03d}.jpg")
    return folder
