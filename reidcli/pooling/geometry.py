"""Spatial pooling areas of a conv map (C-DPCF paper §III-A; the pooling grid: docs/methods/cdpcf.md).

Positions are flattened row-major: ``s = W·row + col`` (row 0 = top), ``S = H·W``.
"""
from __future__ import annotations

import numpy as np

from reidcli.errors import ParameterError


def parse_grid(text: str | tuple[int, int] | None, stripes: int = 6) -> tuple[int, int]:
    """``"6x1"`` → (6, 1) = rows bands × column bands; None → ``(stripes, 1)``."""
    if text is None:
        return (int(stripes), 1)
    if isinstance(text, tuple):
        gh, gw = text
    else:
        try:
            gh, gw = (int(v) for v in str(text).lower().split("x"))
        except ValueError:
            raise ParameterError("pooling", "grid", text, "is not of the form GhxGw",
                                 "e.g. 6x1 (six horizontal stripes)") from None
    if gh < 1 or gw < 1:
        raise ParameterError("pooling", "grid", text, "needs positive band counts", "e.g. 6x1")
    return int(gh), int(gw)


def position_areas(height: int, width: int, grid: tuple[int, int]) -> np.ndarray:
    """Area index g(s) of every position s, int64 [H·W].

    g(s) = ⌊row·Gh/H⌋·Gw + ⌊col·Gw/W⌋ (docs/methods/cdpcf.md; 6x1 on 24×8 → 4 rows per stripe).
    """
    gh, gw = grid
    if gh > height or gw > width:
        raise ParameterError("pooling", "grid", f"{gh}x{gw}",
                             f"is finer than the {height}x{width} conv maps",
                             "use fewer bands than map rows/columns")
    rows = np.arange(height)[:, None] * gh // height
    cols = np.arange(width)[None, :] * gw // width
    return (rows * gw + cols).reshape(-1).astype(np.int64)


def area_positions(areas: np.ndarray) -> list[np.ndarray]:
    """Positions of each area, ``[A_0, A_1, ...]`` (each a sorted int64 array)."""
    return [np.flatnonzero(areas == g) for g in range(int(areas.max()) + 1)]


def same_area_mask(areas: np.ndarray) -> np.ndarray:
    """Π[s, t] = 1 iff g(s) = g(t), float64 [S, S] (the "w/o R" Gram mask of §3.2)."""
    return (areas[:, None] == areas[None, :]).astype(np.float64)
