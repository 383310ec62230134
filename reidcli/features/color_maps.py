"""Hand-crafted spatial feature maps: a conv-map stand-in computed from pixels.

``color-grid`` describes each cell of a 24 × 8 grid (4 × 4 pixels of a 96 × 32 image) with 16
channels, so pooling methods that learn *where* to look (C-DPCF, DPCF) can run on any dataset
without a trained network: RGB mean and standard deviation (6), hue as a saturation-weighted
unit vector, saturation and value means (4), mean absolute horizontal and vertical gray
gradients (2), and a 4-bin value histogram (4). One vectorised pass per batch, no loops.
"""
from __future__ import annotations

import numpy as np

from reidcli.features.color_histograms import rgb_to_hsv

GRID = (24, 8)
CELL = 4
IMAGE_SIZE = (GRID[0] * CELL, GRID[1] * CELL)    # (H, W) = (96, 32)
CHANNELS = 16


def _cells(x: np.ndarray) -> np.ndarray:
    """[n, H, W, c] → [n, 24, 8, 16·c] pixels of each cell (H = 24·4, W = 8·4)."""
    n, h, w, c = x.shape
    gh, gw = h // CELL, w // CELL
    return x.reshape(n, gh, CELL, gw, CELL, c).transpose(0, 1, 3, 2, 4, 5).reshape(
        n, gh, gw, CELL * CELL, c)


def color_grid_maps(images: np.ndarray) -> np.ndarray:
    """uint8 RGB [n, 96, 32, 3] → float32 maps [n, 16, 24, 8] (channels first, like a CNN)."""
    rgb = np.asarray(images, dtype=np.float32) / 255.0
    hsv = rgb_to_hsv(images)
    gray = rgb.mean(-1)
    dx = np.abs(np.diff(gray, axis=2, append=gray[:, :, -1:]))
    dy = np.abs(np.diff(gray, axis=1, append=gray[:, -1:, :]))
    cells_rgb = _cells(rgb)                                   # [n, 24, 8, 16, 3]
    cells_hsv = _cells(hsv)
    angle = 2 * np.pi * cells_hsv[..., 0]
    sat, val = cells_hsv[..., 1], cells_hsv[..., 2]
    grads = _cells(np.stack([dx, dy], axis=-1))
    bins = np.minimum((val * 4).astype(np.int64), 3)
    hist = np.stack([(bins == b).mean(-1) for b in range(4)], axis=-1)
    channels = np.concatenate([
        cells_rgb.mean(3), cells_rgb.std(3),
        np.stack([(sat * np.cos(angle)).mean(-1), (sat * np.sin(angle)).mean(-1),
                  sat.mean(-1), val.mean(-1)], axis=-1),
        grads.mean(3), hist], axis=-1)                        # [n, 24, 8, 16]
    return np.ascontiguousarray(channels.transpose(0, 3, 1, 2), dtype=np.float32)
