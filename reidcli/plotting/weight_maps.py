"""C-DPCF weight maps: Fig. 4 (the first maps of each layer and camera) and Fig. 5 (the sum of
|maps| over k beside each camera's average training image), from a ``reid fit-pooling`` file.

``trial_<k>/<layer>/weight_maps`` is [C·S, K] (camera block c = rows c·S … (c+1)·S − 1; one
block for DPCF), position s = W·row + column on the H×W grid (row 0 = top of the image).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.cameras import CameraTable, camera_key_name
from reidcli.errors import FittedModelError, ParameterError
from reidcli.params import Interval, check_param
from reidcli.plotting.common import finish_figure, pyplot

FIGURES = ("maps", "sum", "both")


@dataclasses.dataclass
class WeightMapPlot:
    """``maps[(layer, camera)]`` [k, H, W] (first maps), ``sums[(layer, camera)]`` [H, W]
    (Σ_k |w_k|), ``images[camera]`` [h, w, 3] average training image (may be empty); a
    camera is its camid (one domain), ``"<domain>/<camid>"`` (several) or -1 (DPCF: all)."""

    maps: dict[tuple[str, int | str], np.ndarray]
    sums: dict[tuple[str, int | str], np.ndarray]
    images: dict[int | str, np.ndarray]
    path: Path | None = None
    #: the drawn colour bars (matplotlib Colorbar): per row, one for its maps (shared
    #: symmetric scale) and one for Σ|maps|
    colorbars: list = dataclasses.field(default_factory=list, repr=False)
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def _grid(hyper: dict, layer: str, rows_per_camera: int) -> tuple[int, int]:
    size = (hyper.get("map_sizes") or {}).get(layer)
    if size:
        h, w = (int(v) for v in size.split("x"))
        return h, w
    if rows_per_camera == 192:                 # docs/methods/cdpcf.md: every layer pooled to 24×8
        return 24, 8
    w = int(round((rows_per_camera / 3) ** 0.5))
    if w * 3 * w == rows_per_camera:           # the 3:1 aspect of person images
        return 3 * w, w
    raise FittedModelError(f"cannot tell the map grid of layer {layer} ({rows_per_camera} "
                           "positions)", "re-fit with this reidcli (it records map sizes)")


def read_weight_maps(fitted: str | os.PathLike, trial: int | None = None,
                     layers: Sequence[str] | None = None, num_maps: int = 4
                     ) -> WeightMapPlot:
    """The maps of one trial (default: the first in the file), reshaped to H×W grids."""
    from reidcli import fitted as fitted_files

    loaded = fitted_files.load(fitted)
    if loaded.method not in ("cdpcf", "dpcf"):
        raise FittedModelError(f"{fitted} is a {loaded.method!r} model, not C-DPCF/DPCF",
                               "give a file from reid fit-pooling cdpcf|dpcf")
    hyper = loaded.hyperparameters
    trials = loaded.trial_ids
    k = trials[0] if trial is None else int(trial)
    if k not in trials:
        raise ParameterError("weight-map plot", "trial", trial,
                             f"is not a trial of the file (it has {trials})", "pick one of them")
    trial_arrays = loaded.arrays(k)
    group = trial_arrays.get(f"{fitted_files.REPEAT_PREFIX}0", trial_arrays)  # reduced ids
    chosen = _chosen_layers(group, layers, hyper, fitted)
    cams = _camera_keys(hyper)
    maps, sums = _layer_maps(group, chosen, hyper, cams, num_maps)
    return WeightMapPlot(maps=maps, sums=sums, images=_average_images(trial_arrays, cams))


def _chosen_layers(group: dict, layers: Sequence[str] | None, hyper: dict,
                   fitted: str | os.PathLike) -> list[str]:
    """The layers to plot: ``layers``, else the fitted ones, else every group holding
    weight maps; ParameterError naming those the file lacks."""
    chosen = list(layers or hyper.get("layers") or [n for n, v in group.items()
                                                    if isinstance(v, dict)
                                                    and "weight_maps" in v])
    missing = [layer for layer in chosen if layer not in group]
    if missing:
        raise ParameterError("weight-map plot", "layers", ",".join(missing),
                             f"are not in {fitted}", f"use {', '.join(hyper.get('layers', []))}")
    return chosen


def _layer_maps(group: dict, chosen: list[str], hyper: dict, cams: list,
                num_maps: int) -> tuple[dict, dict]:
    """(first ``num_maps`` maps [K', H, W], Σ|map| [H, W]) per (layer, camera key); camera
    -1 when the fit has one block of maps (DPCF)."""
    maps, sums = {}, {}
    for layer in chosen:
        weights = np.asarray(group[layer]["weight_maps"])              # [C·S, K]
        blocks = len(cams) if hyper.get("method") == "cdpcf" and cams else 1
        s = weights.shape[0] // blocks
        h, w = _grid(hyper, layer, s)
        for b in range(blocks):
            block = weights[b * s:(b + 1) * s].T.reshape(-1, h, w)   # [K, H, W]
            cam = cams[b] if blocks > 1 else -1
            maps[(layer, cam)] = block[:num_maps]
            sums[(layer, cam)] = np.abs(block).sum(0)
    return maps, sums


def _average_images(trial_arrays: dict, cams: list) -> dict:
    """camera key → the fit's average image of that camera (none when not stored)."""
    images = {}
    if "average_images" in trial_arrays:
        # the average images follow the fitted camera table's order
        image_cams = [int(c) for c in trial_arrays["average_image_camids"]]
        keys = cams if len(cams) == len(image_cams) else image_cams
        for cam, image in zip(keys, trial_arrays["average_images"]):
            images[cam] = np.asarray(image)
    return images


def _camera_keys(hyper: dict) -> list[int | str]:
    """One key per fitted camera, in the file's camera-table order: the camid when the fit
    spans one domain, :meth:`~reidcli.cameras.CameraTable.key` ``"<domain>/<camid>"`` when it
    spans several (a camera is the pair (domain, camid), docs/formats.md)."""
    try:
        table = CameraTable.from_lists(hyper.get("camids", []), hyper.get("camera_domains"))
    except ValueError as exc:
        raise FittedModelError(f"the fitted file's camera list is inconsistent ({exc})",
                               "re-fit with reid fit-pooling") from None
    if not table.several_domains:
        return [int(c) for c in table.cam_ids]
    return [table.key(code) for code in range(table.num_cameras)]


def _camera_name(cam: int | str) -> str:
    """Row label of a camera key: ``cam 3``, ``syn_a/cam 3`` or ``all cams`` (-1, DPCF)."""
    return "all cams" if cam == -1 else camera_key_name(str(cam))


#: largest figure inches per weight-map column (a map is drawn at its grid's aspect below it)
CELL_WIDTH = 0.8
#: the page the grid must fit, in inches (A4 portrait: 8.3 × 11.7; at 300 dpi ≤ 2490 × 3510 px)
PAGE = (8.3, 11.7)
#: inches a block of one (layer, camera) needs besides its cells (row label, colour-bar
#: ticks) and per row of blocks (map titles), and the figure's title band
BLOCK_EXTRA, ROW_EXTRA, TITLE_EXTRA = 0.95, 0.3, 0.6


def page_layout(num_blocks: int, cols: int, aspect: float) -> tuple[int, float]:
    """(blocks per row, cell width in inches) for ``num_blocks`` blocks of ``cols`` cells of
    height/width ``aspect`` on :data:`PAGE`: the number of blocks side by side that gives
    the widest cells (at most :data:`CELL_WIDTH`; ties: fewer per row)."""
    best = (1, 0.0)
    for per_row in range(1, num_blocks + 1):
        rows = -(-num_blocks // per_row)
        by_width = (PAGE[0] - 0.2 - per_row * BLOCK_EXTRA) / (per_row * cols * 1.25)
        by_height = ((PAGE[1] - TITLE_EXTRA - 0.3) / rows - ROW_EXTRA) / aspect
        cell = min(CELL_WIDTH, by_width, by_height)
        if cell > best[1] + 1e-9:
            best = (per_row, cell)
    return best[0], max(best[1], 0.05)


def _font_size(cols: int) -> float:
    """Title / label size in points for a grid ``cols`` columns wide (smaller for wide
    grids, so a column title never runs into its neighbour's)."""
    return float(np.clip(10 - 0.35 * cols, 6.5, 9))


def _colorbar(fig, image, ax, size: float):
    """A colour bar in an inset just right of ``ax`` (an inset keeps ``fig.axes`` = the map
    panels; constrained layout leaves room for it)."""
    cax = ax.inset_axes([1.08, 0.0, 0.12, 1.0])
    bar = fig.colorbar(image, cax=cax)
    bar.ax.tick_params(labelsize=size - 1, length=2, pad=1)
    bar.ax.yaxis.get_offset_text().set_fontsize(size - 1)
    return bar


def plot_weight_maps(fitted: str | os.PathLike, out: str | os.PathLike | None = None, *,
                     trial: int | None = None, layers: Sequence[str] | None = None,
                     num_maps: int = 4, figure: str = "both", force: bool = False
                     ) -> WeightMapPlot:
    """Fig. 4 (``figure="maps"``), Fig. 5 (``"sum"``) or both side by side, of a fitted
    C-DPCF/DPCF file (see :func:`draw_weight_maps`)."""
    if figure not in FIGURES:
        raise ParameterError("weight-map plot", "figure", figure,
                             f"must be one of {', '.join(FIGURES)}")
    num_maps = check_param("weight-map plot", "num_maps", num_maps, Interval(int, 1, 10_000))
    data = read_weight_maps(fitted, trial, layers, num_maps)
    from reidcli import fitted as fitted_files
    method = fitted_files.load(fitted).method
    draw_weight_maps(data, f"{method.upper()} weight maps — {Path(fitted).name}",
                     num_maps=num_maps, figure=figure)
    data.path = finish_figure(data.figure, out, force=force, inputs=[fitted])
    return data


def draw_weight_maps(data: WeightMapPlot, title: str, *, num_maps: int = 4,
                     figure: str = "both") -> WeightMapPlot:
    """Draw ``data`` into a new Figure (set as ``data.figure``) that fits :data:`PAGE`: one
    block of cells per (layer, camera), several blocks side by side when that gives larger
    cells (:func:`page_layout`); ``fig.axes`` lists each block's cells in turn. A block's
    maps share one symmetric colour scale (coolwarm, 0 = white) with a colour bar right of
    its last map; Σ|maps| has its own bar. Matplotlib's constrained
    layout places titles, row labels and bars so that none overprints another (checked
    for K = 10 maps × 6 cameras in tests/plotting)."""
    plt = pyplot()
    keys = list(data.maps)
    show_maps = figure in ("maps", "both")
    show_sum = figure in ("sum", "both")
    cols = (num_maps if show_maps else 0) + (2 if show_sum else 0)
    h, w = next(iter(data.sums.values())).shape
    aspect = min(h / w, 3.5)
    per_row, cell = page_layout(len(keys), cols, aspect)
    grid_rows = -(-len(keys) // per_row)
    size = float(np.clip(_font_size(cols) * min(1.0, cell / CELL_WIDTH + 0.35), 5.5, 9))
    fig, axes = plt.subplots(grid_rows, per_row * cols, squeeze=False, layout="constrained",
                             figsize=(per_row * (cols * 1.25 * cell + BLOCK_EXTRA) + 0.2,
                                      grid_rows * (cell * aspect + ROW_EXTRA) + TITLE_EXTRA))
    fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.06, hspace=0.04)
    for extra in axes.ravel()[len(keys) * cols:] if per_row > 1 else []:
        fig.delaxes(extra)                     # the unused cells after the last block
    data.colorbars = []
    for b, key in enumerate(keys):
        layer, cam = key
        r, c = divmod(b, per_row)
        c *= cols
        first = c
        if show_maps:
            scale = float(np.abs(data.maps[key]).max()) or 1.0
            shown = None
            for m in range(num_maps):
                ax = axes[r][c]
                if m < len(data.maps[key]):
                    shown = ax.imshow(data.maps[key][m], cmap="coolwarm", vmin=-scale,
                                      vmax=scale)
                    if r == 0:
                        ax.set_title(f"map {m + 1}", fontsize=size)
                else:
                    ax.set_axis_off()
                c += 1
            if shown is not None:
                data.colorbars.append(_colorbar(fig, shown, axes[r][c - 1], size))
        if show_sum:
            image = data.images.get(cam)
            if image is not None:
                axes[r][c].imshow(image)
            if r == 0:
                axes[r][c].set_title("mean\nimage" if cell < 0.6 else "mean image",
                                     fontsize=size)
            summed = axes[r][c + 1].imshow(data.sums[key], cmap="hot", vmin=0)
            data.colorbars.append(_colorbar(fig, summed, axes[r][c + 1], size))
            if r == 0:
                axes[r][c + 1].set_title("Σ|maps|", fontsize=size)
        axes[r][first].set_ylabel(f"{layer}\n{_camera_name(cam)}", fontsize=size)
    for ax in fig.axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=size + 1.5)
    data.figure = fig
    return data


__all__ = ["plot_weight_maps", "read_weight_maps", "WeightMapPlot", "draw_weight_maps",
           "FIGURES", "CELL_WIDTH", "PAGE", "page_layout"]
