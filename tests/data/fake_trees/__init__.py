"""Builders of tiny, layout-exact fake copies of every real dataset (docs/datasets.md).

One module per dataset (``fake_trees.viper.build(root) -> Path`` etc.); each writes real but
tiny image files (8x4 pixels, the dataset's own format) with the documented folder names,
file-name patterns, list files and ``.mat`` files, and returns the dataset folder it made.
"""
from __future__ import annotations

from pathlib import Path

from PIL import Image


def write_image(path: Path, size: tuple[int, int] = (4, 8), mode: str = "RGB",
                color: int = 128) -> Path:
    """Write one tiny image (``size`` = (width, height)); the format follows the suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fill = color if mode == "L" else (color, color // 2, 255 - color)
    Image.new(mode, size, fill).save(path)
    return path


def write_images(folder: Path, names, **kwargs) -> list[Path]:
    """Write :func:`write_image` files ``folder/name`` for every name."""
    return [write_image(Path(folder) / name, **kwargs) for name in names]
