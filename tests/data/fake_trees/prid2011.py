"""Fake PRID2011 single-shot tree (docs/datasets.md):
``prid_2011/single_shot/cam_{a,b}/person_NNNN.png`` plus the unused ``multi_shot/``."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image


def build(root: Path, shared: int = 6, only_a: int = 2, only_b: int = 4,
          wrapper: bool = True) -> Path:
    """cam_a persons 1..shared+only_a, cam_b persons 1..shared+only_b (the first ``shared``
    are the same people); ``<root>/prid2011/prid_2011/single_shot`` (``wrapper=False``:
    ``<root>/prid_2011/single_shot``). Also writes one ``multi_shot`` frame (ignored)."""
    base = Path(root) / ("prid2011/prid_2011" if wrapper else "prid_2011")
    folder = base / "single_shot"
    for i in range(1, shared + only_a + 1):
        write_image(folder / "cam_a" / f"person_{i:04d}.png")
    for i in range(1, shared + only_b + 1):
        write_image(folder / "cam_b" / f"person_{i:04d}.png")
    write_image(base / "multi_shot" / "cam_a" / "person_0001" / "0001.png")
    return folder
