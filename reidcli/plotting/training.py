"""Training curves from a run directory's ``metrics.csv`` (written by the training engine):
every ``loss*`` column, the learning rate, and accuracy when logged, against iterations.

A staged run (a ``phase`` column with several values, e.g. DG-VAE's ``stage1``–``stage3``,
DG-VAE paper §4.2) gets one panel per loss term (a term not active in a stage is an empty
cell, drawn as a gap), a panel of the latent statistics when logged (mean margin α, mean σ of
the IDI and IAI codes), dashed stage boundaries with the stage names, and a log y-axis on every
positive panel whose values span more than :data:`LOG_SPAN` (DG-VAE's analytic L_gmm, DG-VAE
paper Eq. 6, starts near 10³ and falls by orders of magnitude while the other terms stay near 1).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reidcli.errors import InputFileError
from reidcli.plotting.common import finish_figure, pyplot

#: a panel whose positive values span more than this ratio (max / min) is drawn on a log axis
LOG_SPAN = 100.0
#: the latent statistics a staged run may log (drawn together in one panel)
LATENT_COLUMNS = ("alpha_mean", "sigma_d", "sigma_a")
#: columns of per-term gradient norms (DG-VAE ``grad_norms``), drawn in one panel
GRADNORM_PREFIX = "gradnorm_"
#: panels per row of a staged run's figure
PANELS_PER_ROW = 4


@dataclasses.dataclass
class TrainingPlot:
    """``series[column]`` = (iterations [n], values [n]) of every plotted column (NaN where a
    row has no value); ``stages`` = (phase, first iteration, last iteration) of each
    contiguous phase of a staged run (empty otherwise); ``log_panels`` = titles of the panels
    drawn on a log y-axis."""

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    path: Path | None = None
    stages: list[tuple[str, float, float]] = dataclasses.field(default_factory=list)
    log_panels: list[str] = dataclasses.field(default_factory=list)
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def read_metrics(run_dir: str | os.PathLike) -> pd.DataFrame:
    path = Path(run_dir) / "metrics.csv"
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read {path} ({exc.__class__.__name__})",
                             "give a run directory written by reid train") from None
    if "iteration" not in frame or frame.empty:
        raise InputFileError(f"{path} has no logged iterations",
                             "train longer or log more often (a smaller log_every)")
    numeric = ["iteration", "epoch", "lr", "acc", *LATENT_COLUMNS,
               *(c for c in frame.columns if str(c).startswith(("loss", GRADNORM_PREFIX)))]
    for column in (c for c in numeric if c in frame):
        _check_numeric(path, frame, column, required=column == "iteration")
    return frame


def _check_numeric(path: Path, frame: pd.DataFrame, column: str, required: bool) -> None:
    """InputFileError naming the file, column and first row whose cell holds text that is
    not a number (an empty cell is a term not logged at that row, allowed unless
    ``required``)."""
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() & (frame[column].notna() | required)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        cell = frame[column].iloc[i]
        raise InputFileError(f"{path}: column {column!r} on line {i + 2} holds "
                             f"{'nothing' if pd.isna(cell) else repr(cell)}, not a number",
                             "give the metrics.csv reid train wrote (was it edited?)")


def _run_name(run_dir: Path) -> str:
    """``method on dataset (backbone)`` from the run's config.json; the folder name when
    that file is missing or not the config reid train writes."""
    try:
        cfg = json.loads((run_dir / "config.json").read_text()).get("config", {})
    except (OSError, ValueError, AttributeError):
        return run_dir.name
    if not isinstance(cfg, dict):
        return run_dir.name
    if not cfg.get("method"):
        return run_dir.name
    name = str(cfg["method"]) + (f" on {cfg['dataset']}" if cfg.get("dataset") else "")
    return name + (f" ({cfg['backbone']})" if cfg.get("backbone") else "") + f" — {run_dir.name}"


def phase_segments(frame: pd.DataFrame) -> list[tuple[str, float, float]]:
    """(phase, first iteration, last iteration) of each contiguous run of rows with the same
    ``phase``; empty when the run has no ``phase`` column or a single phase."""
    if "phase" not in frame or frame["phase"].nunique(dropna=True) < 2:
        return []
    phases = frame["phase"].astype(str).to_numpy()
    x = frame["iteration"].to_numpy(dtype=float)
    starts = np.flatnonzero(np.r_[True, phases[1:] != phases[:-1]])
    ends = np.r_[starts[1:] - 1, len(phases) - 1]
    return [(phases[s], x[s], x[e]) for s, e in zip(starts, ends)]


def needs_log_scale(values: list[np.ndarray]) -> bool:
    """True when every finite value is positive and they span more than :data:`LOG_SPAN`."""
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.zeros(0)
    if not len(finite) or (finite <= 0).any():
        return False
    return finite.max() / finite.min() > LOG_SPAN


def _numeric(frame: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def _panels(frame: pd.DataFrame, staged: bool) -> list[tuple[str, list[str]]]:
    """(title, columns) of each panel: all losses together (one run phase), or the total and
    one panel per logged term (staged); then learning rate, latent statistics, accuracy."""
    # a term the run never logged (e.g. loss_rec of a stage-1-only DG-VAE run) gets no line
    logged = [c for c in frame.columns
              if c.startswith("loss") and np.isfinite(_numeric(frame, c)).any()]
    if staged:
        loss_panels = [(c if c != "loss" else "loss (weighted total)", [c]) for c in logged]
    else:
        loss_panels = [("loss", logged)]
    panels = [*loss_panels, ("learning rate", ["lr"] if "lr" in frame else []),
              ("latent statistics", [c for c in LATENT_COLUMNS if c in frame and
                                     np.isfinite(_numeric(frame, c)).any()]),
              ("accuracy", [c for c in ("acc",) if c in frame]),
              # DG-VAE's optional per-term gradient norms on the encoders (grad_norms=true)
              ("gradient norm per term", [c for c in frame.columns
                                          if str(c).startswith(GRADNORM_PREFIX)
                                          and np.isfinite(_numeric(frame, c)).any()])]
    return [(t, cols) for t, cols in panels if cols]


def _mark_stages(ax, stages: list[tuple[str, float, float]]) -> None:
    """Dashed lines between stages and each stage's name at the top of its span."""
    transform = ax.get_xaxis_transform()          # x in data, y in axes fraction
    for (_, _, end), (_, start, _) in zip(stages[:-1], stages[1:]):
        ax.axvline((end + start) / 2, color="black", linestyle="--", linewidth=0.9)
    for name, start, end in stages:
        ax.text((start + end) / 2, 0.98, name, transform=transform, ha="center", va="top",
                fontsize=7, color="dimgrey")


def plot_training(run_dir: str | os.PathLike, out: str | os.PathLike | None = None, *,
                  force: bool = False) -> TrainingPlot:
    """Panels: losses, learning rate, latent statistics, accuracy and the per-term gradient
    norms (each when logged; gradient norms and learning rate on a log axis);
    epoch boundaries dotted; a staged run also gets one panel per loss term and its stage
    boundaries dashed and named."""
    frame = read_metrics(run_dir)
    x = _numeric(frame, "iteration")
    stages = phase_segments(frame)
    panels = _panels(frame, staged=bool(stages))
    plt = pyplot()
    ncols = min(len(panels), PANELS_PER_ROW) if stages else len(panels)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.6 * nrows), squeeze=False,
                             sharex=bool(stages))
    series, log_panels = {}, []
    epochs = frame["epoch"].to_numpy() if "epoch" in frame else np.zeros(0)
    ends = x[np.flatnonzero(epochs[1:] != epochs[:-1])] if len(epochs) else []
    stage_ends = {end for _, _, end in stages}
    for index, (ax, (title, cols)) in enumerate(zip(axes.ravel(), panels)):
        for col in cols:
            y = _numeric(frame, col)
            series[col] = (x, y)
            ax.plot(x, y, label=col, marker="." if np.isfinite(y).sum() < 3 else None)
        for end in ends:
            if end not in stage_ends:
                ax.axvline(end, color="grey", linestyle=":", linewidth=0.7)
        _mark_stages(ax, stages)
        if title in ("learning rate", "gradient norm per term") \
                or needs_log_scale([series[c][1] for c in cols]):
            ax.set_yscale("log")
            log_panels.append(title)
        if index + ncols >= len(panels):          # the lowest panel of its column
            ax.set_xlabel("iteration")
            ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_title(title, fontsize=9)
        if len(cols) > 1:
            ax.legend(fontsize=8)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    name = _run_name(Path(run_dir))
    fig.suptitle(f"training — {name}", fontsize=10)
    plot = TrainingPlot(series=series, stages=stages, log_panels=log_panels, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              inputs=[Path(run_dir) / "metrics.csv"])
    return plot


__all__ = ["plot_training", "read_metrics", "phase_segments", "needs_log_scale",
           "TrainingPlot", "LOG_SPAN"]
