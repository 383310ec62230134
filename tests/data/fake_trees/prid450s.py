"""Fake PRID450S tree (docs/datasets.md): ``cam_a/``, ``cam_b/`` with ``img_NNNN.png`` plus
mask files that the loader must ignore."""
from __future__ import annotations

from pathlib import Path

from tests.data.fake_trees import write_image


def build(root: Path, persons: int = 8, wrapper: bool = False, masks: bool = True) -> Path:
    """``<root>/PRID450S/cam_{a,b}/img_NNNN.png`` (``wrapper``: ``<root>/prid450s/PRID450S/``)
    for persons 0001..persons; ``masks`` adds a ``man_NNNN.png`` greyscale mask and a
    ``img_NNNN_mask.png`` next to every image (names the loader must skip)."""
    folder = Path(root) / ("prid450s/PRID450S" if wrapper else "PRID450S")
    for i in range(1, persons + 1):
        for cam in ("cam_a", "cam_b"):
            write_image(folder / cam / f"img_{i:04d}.png")
            if masks:
                write_image(folder / cam / f"man_{i:04d}.png", mode="L")
                write_image(folder / cam / f"img_{i:04d}_mask.png", mode="L")
    return folder
