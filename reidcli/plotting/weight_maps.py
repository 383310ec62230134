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

from reidcli.errors import FittedModelError, ParameterError
from reidcli.plotting.common import finish_figure, pyplot

FIGURES = ("maps", "sum", "both")


@dataclasses.dataclass
class WeightMapPlot:
    """``maps[(layer, camid)]`` [k, H, W] (first maps), ``sums[(layer, camid)]`` [H, W]
    (Σ_k |w_k|), ``images[camid]`` [h, w, 3] average training image (may be empty)."""

    maps: dict[tuple[str, int], np.ndarray]
    sums: dict[tuple[str, int], np.ndarray]
    images: dict[int, np.ndarray]
    path: Path | None = None
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
    chosen = list(layers or hyper.get("layers") or [n for n, v in group.items()
                                                    if isinstance(v, dict)
                                                    and "weight_maps" in v])
    missing = [layer for layer in chosen if layer not in group]
    if missing:
        raise ParameterError("weight-map plot", "layers", ",".join(missing),
                             f"are not in {fitted}", f"use {', '.join(hyper.get('layers', []))}")
    cams = [int(c) for c in hyper.get("camids", [])]
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
    images = {}
    if "average_images" in trial_arrays:
        for cam, image in zip(trial_arrays["average_image_camids"],
                              trial_arrays["average_images"]):
            images[int(cam)] = np.asarray(image)
    return WeightMapPlot(maps=maps, sums=sums, images=images)


def plot_weight_maps(fitted: str | os.PathLike, out: str | os.PathLike | None = None, *,
                     trial: int | None = None, layers: Sequence[str] | None = None,
                     num_maps: int = 4, figure: str = "both", force: bool = False
                     ) -> WeightMapPlot:
    """Fig. 4 (``figure="maps"``), Fig. 5 (``"sum"``) or both side by side."""
    if figure not in FIGURES:
        raise ParameterError("weight-map plot", "figure", figure,
                             f"must be one of {', '.join(FIGURES)}")
    data = read_weight_maps(fitted, trial, layers, num_maps)
    plt = pyplot()
    keys = list(data.maps)
    show_maps = figure in ("maps", "both")
    show_sum = figure in ("sum", "both")
    cols = (num_maps if show_maps else 0) + (2 if show_sum else 0)
    fig, axes = plt.subplots(len(keys), cols, figsize=(1.3 * cols + 1, 2.2 * len(keys)),
                             squeeze=False)
    for r, key in enumerate(keys):
        layer, cam = key
        c = 0
        row_label = f"{layer}\n" + (f"camera {cam}" if cam >= 0 else "all cameras")
        if show_maps:
            for m in range(num_maps):
                ax = axes[r][c]
                if m < len(data.maps[key]):
                    ax.imshow(data.maps[key][m], cmap="coolwarm")
                    if r == 0:
                        ax.set_title(f"map {m + 1}", fontsize=8)
                c += 1
        if show_sum:
            image = data.images.get(cam)
            if image is not None:
                axes[r][c].imshow(image)
            if r == 0:
                axes[r][c].set_title("average image", fontsize=8)
            axes[r][c + 1].imshow(data.sums[key], cmap="hot")
            if r == 0:
                axes[r][c + 1].set_title("Σ|maps|", fontsize=8)
        axes[r][0].set_ylabel(row_label, fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    from reidcli import fitted as fitted_files
    method = fitted_files.load(fitted).method
    fig.subplots_adjust(top=1 - 0.5 / (2.2 * len(keys)))   # title close to the first row
    fig.suptitle(f"{method.upper()} weight maps — {Path(fitted).name}", fontsize=10)
    data.figure = fig
    data.path = finish_figure(fig, out, force=force,
                              inputs=[fitted])
    return data


__all__ = ["plot_weight_maps", "read_weight_maps", "WeightMapPlot", "FIGURES"]
