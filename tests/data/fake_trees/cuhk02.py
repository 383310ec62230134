"""Fake CUHK02 tree (docs/datasets.md): ``cuhk02/Dataset/P1..P5/{cam1,cam2}/<id>_<...>.png``,
2 images per person per camera; person ids restart in every pair folder."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image

IDS_PER_PAIR = (3, 2, 2, 2, 3)


def build(root: Path, ids_per_pair=IDS_PER_PAIR, wrapper: bool = True) -> Path:
    """``<root>/cuhk02/Dataset`` (``wrapper=False``: ``<root>/Dataset``); pair k holds persons
    ``001``..``ids_per_pair[k-1]`` named ``{id:03d}_{cam}{k}.png``."""
    folder = Path(root) / ("cuhk02/Dataset" if wrapper else "Dataset")
    for pair, count in enumerate(ids_per_pair, start=1):
        for cam in (1, 2):
            for i in range(1, count + 1):
                for k in (1, 2):
                    write_image(folder / f"P{pair}" / f"cam{cam}" / f"{i:03d}_{cam}{k}.png",
                                size=(6, 16))
    return folder
