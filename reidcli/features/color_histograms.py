"""HSV colour histograms over horizontal stripes — the classic hand-crafted re-id descriptor.

Used by ``reid demo`` and by the synthetic dataset's difficulty check (docs/datasets.md).
Histograms are computed for a whole batch at once with one ``np.bincount`` over flat bin
indices, so there is no Python loop over images or pixels.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from PIL import Image

from reidcli.errors import InputFileError, UsageError
from reidcli.numeric import l2_normalize_rows

#: images per bincount call; bounds the int64 index array to ~batch·H·W·3·8 bytes
_BATCH = 64


def rgb_to_hsv(images: np.ndarray) -> np.ndarray:
    """uint8 RGB [..., 3] → float32 HSV [..., 3], each channel in [0, 1] (hue 0 for greys)."""
    rgb = np.asarray(images, dtype=np.float32) / 255.0
    maxc = rgb.max(axis=-1)
    minc = rgb.min(axis=-1)
    delta = maxc - minc
    safe = np.where(delta > 0, delta, 1.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hue = np.where(maxc == r, ((g - b) / safe) % 6.0,
                   np.where(maxc == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    hue = np.where(delta > 0, hue / 6.0, 0.0)
    sat = np.where(maxc > 0, delta / np.where(maxc > 0, maxc, 1.0), 0.0)
    return np.stack([hue, sat, maxc], axis=-1).astype(np.float32)


def hsv_stripe_histograms(images: np.ndarray, stripes: int = 6, bins: int = 8) -> np.ndarray:
    """HSV histograms of horizontal stripes, one L2-normalised descriptor per image.

    Parameters
    ----------
    images: uint8 [N, H, W, 3] RGB images.
    stripes: number of equal-height horizontal stripes (row ``y`` is in stripe
        ``y·stripes // H``).
    bins: histogram bins per channel over [0, 1].

    Returns float32 [N, stripes·3·bins], laid out stripe-major, then channel (H, S, V), then
    bin; each row has unit L2 norm. Horizontal mirroring leaves it unchanged.
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3:
        raise UsageError(f"images have shape {images.shape}", "pass uint8 [N, H, W, 3] RGB")
    if stripes < 1 or bins < 1:
        raise UsageError(f"stripes={stripes}, bins={bins}", "use at least 1 stripe and 1 bin")
    n, height, width, _ = images.shape
    if height < stripes:
        raise UsageError(f"images are {height} rows high but stripes={stripes}",
                         "use at most one stripe per row")
    dim = stripes * 3 * bins
    out = np.empty((n, dim), dtype=np.float32)
    stripe_of_row = (np.arange(height) * stripes) // height                    # [H]
    # offset of (stripe, channel) in the descriptor: [H, 1, 3]
    cell = (stripe_of_row[:, None, None] * 3 + np.arange(3)[None, None, :]) * bins
    for start in range(0, n, _BATCH):
        batch = images[start:start + _BATCH]
        b = len(batch)
        hsv = rgb_to_hsv(batch)                                                 # [b, H, W, 3]
        which_bin = np.minimum((hsv * bins).astype(np.int64), bins - 1)
        flat = which_bin + cell[None] + (np.arange(b) * dim)[:, None, None, None]
        counts = np.bincount(flat.ravel(), minlength=b * dim).reshape(b, dim)
        out[start:start + b] = counts
    return l2_normalize_rows(out)


def load_images(paths: Sequence[str | os.PathLike],
                size: tuple[int, int] | None = None) -> np.ndarray:
    """Decode images as RGB (``PIL.Image.convert("RGB")``): uint8 [N, H, W, 3].

    ``size`` = (H, W) resizes bilinearly; without it every image must have the first
    image's size.
    """
    arrays = []
    for path in paths:
        try:
            with Image.open(path) as img:
                img = img.convert("RGB")
                if size is not None and img.size != (size[1], size[0]):
                    img = img.resize((size[1], size[0]), Image.BILINEAR)
                arrays.append(np.asarray(img))
        except OSError as exc:
            raise InputFileError(f"cannot read image {path} ({exc.__class__.__name__})",
                                 "check the file; `reid data check` validates a dataset") \
                from None
    if not arrays:
        target = size or (0, 0)
        return np.zeros((0, *target, 3), np.uint8)
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise UsageError(f"images have different sizes {sorted(shapes)}",
                         "pass size=(H, W) to resize them on load")
    return np.stack(arrays)
